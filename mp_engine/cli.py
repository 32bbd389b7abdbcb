"""The command line: one function per subcommand, one place that maps errors to exit codes.

Exit codes (also in README.md):
  0  success, or nothing to do
  1  the MP ended in ERROR (`once`), or the MP file is invalid (`check`)
  2  usage, configuration or workspace error (nothing was started)
  3  `once`: an MP is waiting but the engine is halted on a failed MP
  4  `once`/`approve`: another engine held the workspace lock past the lock timeout
  5  `once`: stopped by a signal before the MP finished; it resumes on the next start
  6  `send`: an MP is still pending in the remote's inbox (use --force to replace it)
  7  `send --wait`: no result before --timeout (the MP stays sent)
  8  `send`: git failed (clone, fetch or push); the message says why
  9  `run`: the main loop stalled past [watch] stall_limit; the service manager restarts it
Also: `doctor` exits 1 when a check fails.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mp_engine import __version__, logs
from mp_engine.config import Config, load_config
from mp_engine.errors import ConfigError, InvalidMPError, LockTimeout, MpEngineError, StateError, WorkspaceError
from mp_engine.mpfile import parse, require_executable
from mp_engine.workspace import Workspace, init_workspace

if TYPE_CHECKING:
    from mp_engine.engine import Engine

EXIT_OK, EXIT_MP_ERROR, EXIT_USAGE, EXIT_HALTED, EXIT_BUSY, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5

ONCE_EXIT = {
    "completed": EXIT_OK,
    "idle": EXIT_OK,
    "waiting": EXIT_OK,
    "error": EXIT_MP_ERROR,
    "halted": EXIT_HALTED,
    "busy": EXIT_BUSY,
    "interrupted": EXIT_INTERRUPTED,
    "failed": EXIT_MP_ERROR,
}

root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="MP_ENGINE_ROOT",
    default=".",
    show_default="current directory, or $MP_ENGINE_ROOT",
    help="Workspace root.",
)


def _load(root: Path) -> tuple[Workspace, Config]:
    ws = Workspace.at(root)
    ws.check()
    return ws, load_config(ws.root)


def _channel(ws: Workspace, config: Config) -> dict:
    """The redactor, and the git sync when [git] is enabled (docs/GIT.md)."""
    from mp_engine.gitsync import GitSync
    from mp_engine.redact import Redactor

    redact = Redactor.from_config(config)
    return {"redact": redact, "sync": GitSync(ws, config.git, redact=redact) if config.git.enabled else None}


def _install_signal_handlers(engine: Engine) -> list[threading.Thread]:
    """First SIGTERM/SIGINT: finish the current step and stop. Second: stop now.

    The handler touches no lock: it counts the signal and hands the rest to a short-lived
    thread, which sets the engine's events and writes the event. A handler runs in the main
    thread between two bytecodes, possibly inside `Event.wait()` while that holds the
    event's internal lock (after `with self._cond:`, before the wait releases it); calling
    `Event.set()` there deadlocks the main thread on a lock it holds itself. The same goes
    for the event log's lock. The caller joins the returned threads before exiting, so no
    log line is cut off at exit.
    """
    emitters: list[threading.Thread] = []
    received = [0]

    def relay(name: str, urgent: bool) -> None:
        if urgent:
            engine.stop_now.set()
        engine.stop.set()
        engine.wake.set()
        engine.events.emit("stop_requested", signal=name, mode="now" if urgent else "after current step")

    def handler(signum: int, _frame: object) -> None:
        received[0] += 1
        emitter = threading.Thread(
            target=relay, args=(signal.Signals(signum).name, received[0] > 1), name="mp-engine-signal", daemon=True
        )
        emitters.append(emitter)
        emitter.start()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return emitters


def _join(emitters: list[threading.Thread]) -> None:
    for emitter in list(emitters):
        emitter.join(timeout=2.0)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mp-engine")
@click.option(
    "--log-level", default="info", type=click.Choice(["debug", "info", "warning", "error"]), help="Log verbosity."
)
def cli(log_level: str) -> None:
    """mp-engine runs micro-projects (MPs) dropped into Claude_Inbox/ (MP-1.3).

    \b
    Quick start:
      mp-engine init myspace          # create a workspace
      mp-engine run --root myspace    # the daemon, in the foreground
      cp examples/hello.md myspace/Claude_Inbox/incoming_microproject.txt
      mp-engine status --root myspace
    """
    logs.configure(log_level)


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--remote", metavar="URL", help="Use the git repository at URL as the channel (docs/GIT.md).")
@click.option("--branch", default="main", show_default=True, help="Branch of --remote that carries MPs and results.")
def init(directory: Path, remote: str | None, branch: str) -> int:
    """Create a workspace in DIRECTORY (idempotent; never overwrites).

    With --remote, clone URL when DIRECTORY is empty (or attach it to an existing
    repository), enable [git] in mp-engine.toml, and commit and push the layout.

    \b
    Examples:
      mp-engine init ~/mp-workspace
      mp-engine init --remote git@github.com:me/mp-channel.git ~/mp-workspace
    """
    if remote:
        from mp_engine.gitsync import setup_remote

        for line in setup_remote(directory, remote, branch):
            click.echo(line)
        return EXIT_OK
    ws, created = init_workspace(directory)
    if created:
        click.echo(f"initialised mp-engine workspace {ws.root}")
        for path in created:
            click.echo(f"  created {path}")
    else:
        click.echo(f"{ws.root} is already an mp-engine workspace; nothing changed")
    return EXIT_OK


@cli.command()
@root_option
def run(root: Path) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT.

    The first signal finishes the current step and stops (the MP resumes on the next
    start); a second signal stops at once.

    \b
    Example:
      mp-engine run --root ~/mp-workspace
    """
    from mp_engine.engine import Engine
    from mp_engine.supervisor import Supervisor

    ws, config = _load(root)
    engine = Engine(ws, config, **_channel(ws, config))
    # systemd notify + watchdog, the stall limit, log rotation and metrics (supervisor.py)
    supervisor = Supervisor(engine, config).install()
    emitters = _install_signal_handlers(engine)
    try:
        supervisor.start_metrics()
        engine.run()
    finally:
        supervisor.uninstall()
        _join(emitters)
    return EXIT_OK


@cli.command()
@root_option
def once(root: Path) -> int:
    """Do exactly one pass: run the waiting MP, if any, and exit.

    \b
    Exit codes: 0 completed or nothing to do, 1 the MP ended in ERROR, 2 usage or config
    error, 3 halted (an MP waits for approval), 4 workspace busy, 5 interrupted.
    """
    from mp_engine.engine import Engine

    ws, config = _load(root)
    engine = Engine(ws, config, **_channel(ws, config))
    emitters = _install_signal_handlers(engine)
    engine.start(daemon=False)
    try:
        result = engine.tick()
        # A file dropped just now is not "complete" until it settles; one pass waits for
        # that window rather than reporting nothing to do.
        # An agent run waiting out a rate or usage limit (run_id set) may wait for hours: report it instead.
        while (
            result.action == "waiting"
            and result.wait_until is not None
            and result.run_id is None
            and not engine.stop.is_set()
        ):
            engine.stop.wait(max(0.0, result.wait_until - time.monotonic()))
            result = engine.tick()
    finally:
        engine.shutdown()
        _join(emitters)
    click.echo(
        f"{result.action}"
        + (f" {result.mp_id}" if result.mp_id else "")
        + (f": {result.detail}" if result.detail else "")
    )
    return ONCE_EXIT.get(result.action, EXIT_MP_ERROR)


@cli.command()
@root_option
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def status(root: Path, as_json: bool) -> int:
    """Show the state, the current MP and step, the last MP, the halt and why, git and the last error.

    \b
    Examples:
      mp-engine status --root ~/mp-workspace
      mp-engine status --json | jq .summary
    """
    from mp_engine.status import render_status, status_report

    ws, config = _load(root)
    report = status_report(ws, config)
    click.echo(json.dumps(report, indent=2) if as_json else render_status(report, color=sys.stdout.isatty()))
    return EXIT_OK


@cli.command()
@root_option
@click.option("-n", "limit", type=click.IntRange(min=1), default=20, show_default=True, help="How many MPs.")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def history(root: Path, limit: int, as_json: bool) -> int:
    """List past MPs from the run archive, newest first: id, title, status, certificate, duration, time.

    \b
    Example:
      mp-engine history -n 5
    """
    from mp_engine.history import history as runs
    from mp_engine.history import render_history

    ws = Workspace.at(root)
    ws.check()
    entries = runs(ws, limit)
    click.echo(json.dumps(entries, indent=2) if as_json else render_history(entries))
    return EXIT_OK


@cli.command("logs")
@root_option
@click.option("-n", "lines", type=click.IntRange(min=0), default=20, show_default=True, help="Lines of history first.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events (across log rotation) until Ctrl-C.")
@click.option("--json", "raw", is_flag=True, help="Print the JSON lines as they are.")
def logs_command(root: Path, lines: int, follow: bool, raw: bool) -> int:
    """Show the event log (SYSTEM/.engine/events.jsonl) in readable lines.

    \b
    Examples:
      mp-engine logs -n 50
      mp-engine logs -f
    """
    from mp_engine import tail

    ws, config = _load(root)
    show = (lambda line: click.echo(line)) if raw else (lambda line: click.echo(tail.render_event(line)))
    older = tail.rotated_files(ws.events_file, ws.local_dir, config.engine.events_keep)
    start = tail.position(ws.events_file)  # before reading: a line written meanwhile is followed, not lost
    for line in tail.last_lines(ws.events_file, lines, older, upto=start[1] if start else None):
        show(line)
    if follow:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        sys.stdout.flush()
        tail.follow(
            ws.events_file,
            lambda line: (show(line), sys.stdout.flush()),
            stop,
            start,
            archive_dir=ws.local_dir,
            keep=config.engine.events_keep,
        )
    return EXIT_OK


@cli.command()
@root_option
def doctor(root: Path) -> int:
    """Check the workspace, git, signatures, the host and the agent chain; print one line each.

    Exits 1 if any check fails (warnings do not). Each line that is not ok says the fix.

    \b
    Example:
      mp-engine doctor --root ~/mp-workspace
    """
    from mp_engine.doctor import FAIL, OK, WARN, run_checks

    checks = run_checks(root)
    colours = {OK: "green", WARN: "yellow", FAIL: "red"}
    tty = sys.stdout.isatty()
    for c in checks:
        line = c.line()
        click.echo(click.style(line, fg=colours[c.level]) if tty and c.level != OK else line)
    failed = sum(c.level == FAIL for c in checks)
    warned = sum(c.level == WARN for c in checks)
    click.echo(f"{len(checks)} checks: {failed} failed, {warned} warnings")
    return EXIT_MP_ERROR if failed else EXIT_OK


@cli.group()
def service() -> None:
    """Run mp-engine as a systemd service or a launchd agent."""


@service.command("install")
@root_option
@click.option("--user", "user_scope", is_flag=True, help="A systemd --user unit instead of a system unit.")
@click.option("--systemd", "manager", flag_value="systemd", help="Write a systemd unit (default on Linux).")
@click.option("--launchd", "manager", flag_value="launchd", help="Write a launchd agent plist (default on macOS).")
@click.option("--run-as", metavar="NAME", help="System unit: the user to run as (default: the workspace's owner).")
@click.option("--dry-run", is_flag=True, help="Print the file and the commands; write nothing.")
def service_install(root: Path, user_scope: bool, manager: str | None, run_as: str | None, dry_run: bool) -> int:
    """Write the unit or plist for the workspace, with this venv's interpreter, and print
    the exact systemctl/launchctl commands that enable it.

    \b
    Examples:
      mp-engine service install --user --root ~/mp-workspace
      sudo .venv/bin/mp-engine service install --root /var/lib/mp-engine/workspace
      mp-engine service install --launchd --root ~/mp-workspace --dry-run
    """
    from mp_engine import service as svc

    ws, config = _load(root)
    manager = manager or svc.detect_manager()
    rendered = svc.render(ws, config, manager=manager, user_scope=user_scope, run_as=run_as)
    if dry_run:
        click.echo(f"# {rendered.path} ({rendered.manager} {rendered.scope} service; --dry-run: not written)")
        click.echo(rendered.text, nl=not rendered.text.endswith("\n"))
    else:
        what = svc.install(rendered)
        click.echo(f"{what} {rendered.path}")
    for note in rendered.notes:  # on stderr: --dry-run's stdout is the file and the commands only
        click.echo(f"note: {note}", err=True)
    if manager == "launchd" and user_scope:
        click.echo("note: a launchd agent always runs as you; --user changes nothing here", err=True)
    click.echo("then run:" if not dry_run else "# to enable it, after writing it:")
    for command in rendered.commands:
        click.echo(f"  {command}")
    return EXIT_OK


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the parsed MP as JSON.")
@click.option("--max-bytes", type=int, default=1024 * 1024, show_default=True, help="Size cap to apply.")
def check(file: Path, as_json: bool, max_bytes: int) -> int:
    """Parse an MP file without running it; exit 1 with a precise message if invalid.

    \b
    Example:
      mp-engine check examples/hello.md
    """
    try:
        mp = parse(file.read_bytes(), max_bytes=max_bytes)
        if (mp.executor or "shell") == "shell":
            require_executable(mp)
        else:
            from mp_engine.agent.decompose import decompose
            from mp_engine.executors.agent import AgentExecutor

            AgentExecutor().validate(mp)
            micro_tasks = decompose(mp).summary(mp)
    except InvalidMPError as e:
        click.echo(f"{file}: invalid MP: {e.reason}" + (f" (line {e.line})" if e.line else ""), err=True)
        click.echo(f"fix: {e.fix}", err=True)
        return EXIT_MP_ERROR
    summary = mp.summary()
    if mp.executor == "agent":
        summary["micro_tasks"] = micro_tasks
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return EXIT_OK
    click.echo(f"{mp.mp_id}: {mp.title or '(no title)'}")
    for key, value in mp.headers.items():
        click.echo(f"  {key}: {value}")
    click.echo(f"  sha256: {mp.sha256}")
    click.echo(f"steps ({len(mp.steps)}):")
    for s in summary["steps"]:
        click.echo(f"  {s['id']}  line {s['line']:<4} {s['what']}")
    click.echo(f"checks ({len(mp.checks)}):")
    for c in summary["checks"]:
        click.echo(f"  {c['id']}  line {c['line']:<4} {c['what']}")
    if mp.executor == "agent":  # the decomposition rule: docs/AGENT.md
        click.echo(f"micro-tasks ({len(micro_tasks)}), each accepted by its checks:")
        for t in micro_tasks:
            click.echo(f"  {t['id']}  line {t['line']:<4} {t['title']}  [{', '.join(t['checks']) or 'no checks'}]")
        if mp.steps:
            click.echo(
                "note: the agent executor does not run the fenced blocks above; they are part of the instructions"
            )
    for note in mp.notes:
        click.echo(f"note: {note}")
    return EXIT_OK


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--repo", required=True, metavar="URL_OR_PATH", help="The channel repository, or a working clone of it.")
@click.option("--branch", default="main", show_default=True, help="Branch the engine watches.")
@click.option("--wait", is_flag=True, help="Wait for the result, print it, exit 0 COMPLETED / 1 ERROR.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds --wait waits (then exit 7).")
@click.option("--poll", type=float, default=2.0, show_default=True, help="Seconds between checks while waiting.")
@click.option("--force", is_flag=True, help="Replace an MP still pending in the inbox.")
def send(file: Path, repo: str, branch: str, wait: bool, timeout: float, poll: float, force: bool) -> int:
    """Send an MP to an engine through its git remote (the orchestrator's side).

    Validates FILE as `check` does, commits it as Claude_Inbox/incoming_microproject.txt
    in a working clone of --repo and pushes. Exit codes: 0 sent / COMPLETED, 1 invalid MP /
    ERROR, 6 an MP is still pending, 7 --wait timed out, 8 git failed (docs/GIT.md).

    \b
    Example:
      mp-engine send examples/hello.md --repo git@github.com:me/mp-channel.git --wait
    """
    from mp_engine.send import send_mp

    return send_mp(
        file,
        repo,
        branch=branch,
        wait=wait,
        timeout=timeout,
        poll=poll,
        force=force,
        echo=click.echo,
        err=lambda m: click.echo(m, err=True),
    )


@cli.command()
@root_option
def approve(root: Path) -> int:
    """Lift an ERROR halt so the engine takes new MPs again."""
    from mp_engine.engine import Engine

    ws, config = _load(root)
    approved = Engine(ws, config).approve(via="cli")
    click.echo(
        f"approved: the halt on {approved} is lifted" if approved else "the engine is not halted; nothing to approve"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for `mp-engine` and `python -m mp_engine`; returns the exit code."""
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="mp-engine", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return EXIT_USAGE
    except click.Abort:
        return EXIT_INTERRUPTED
    except (ConfigError, WorkspaceError, StateError) as e:
        click.echo(f"mp-engine: {e}", err=True)
        return EXIT_USAGE
    except LockTimeout as e:
        click.echo(f"mp-engine: {e}", err=True)
        return EXIT_BUSY
    except MpEngineError as e:
        click.echo(f"mp-engine: {e}", err=True)
        return EXIT_MP_ERROR
    return rv if isinstance(rv, int) else EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
