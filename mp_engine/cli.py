"""The command line: click wiring, `main(argv)`, and the one place that maps errors to
exit codes (the table itself is `exitcodes.ExitCode`; README.md lists it).

Each subcommand's body is `commands/<name>.py`. They are imported inside the click
functions so that `--help`, `status` and `check` do not import the daemon, watchdog or
the agent loop they do not use (bench figure 8).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from mp_engine import __version__
from mp_engine.cli_loop import loop
from mp_engine.cli_orchestrator import mcp, send
from mp_engine.commands import say_error as _err
from mp_engine.errors import MpEngineError
from mp_engine.exitcodes import ExitCode, for_error
from mp_engine.record import logs

LOUD = ("run", "mcp", "worker")  # the commands that log at info: daemons
root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="MP_ENGINE_ROOT",
    default=".",
    show_default="current directory, or $MP_ENGINE_ROOT",
    help="Workspace root.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mp-engine")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    help="Log verbosity on stderr (default: info for `run`, warning for every other command).",
)
@click.option("-v", "--verbose", is_flag=True, help="Show the engine's log lines (info) in any command.")
@click.pass_context
def cli(ctx: click.Context, log_level: str | None, verbose: bool) -> None:
    """mp-engine runs micro-projects (MPs) dropped into Claude_Inbox/ (MP-1.3).

    \b
    Quick start:
      mp-engine init myspace          # create a workspace
      mp-engine run --root myspace    # the daemon, in the foreground
      printf '# MP-1.0 Hello\\n\\n```bash\\necho hello\\n```\\n' \\
          > myspace/Claude_Inbox/incoming_microproject.txt   # in another terminal
      mp-engine status --root myspace
      cat myspace/SYSTEM/RESULT_last.md
    """
    # The daemon's log lines are its journal; the other commands speak to a person and
    # print only warnings beside their own output, unless asked (-v).
    logs.configure(log_level or ("info" if verbose or ctx.invoked_subcommand in LOUD else "warning"))


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--remote", metavar="URL", help="Use the git repository at URL as the channel (docs/GIT.md).")
@click.option("--branch", default="main", show_default=True, help="Branch of --remote that carries MPs and results.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="NAME",
    help="Add this agent level (claude, codex, aider, ollama; repeat for a chain, cheap first), then a hard gate.",
)
def init(directory: Path, remote: str | None, branch: str, agents: tuple[str, ...]) -> int:
    """Create a workspace in DIRECTORY (idempotent; never overwrites).

    With --remote, clone URL when DIRECTORY is empty (or attach it to an existing
    repository), enable [git] in mp-engine.toml, and commit and push the layout.
    With --agent, write the agent chain docs/AGENT.md gives for those CLIs (when the
    configuration has none yet).

    \b
    Examples:
      mp-engine init ~/mp-workspace
      mp-engine init --remote git@github.com:me/mp-channel.git ~/mp-workspace
      mp-engine init --agent aider --agent claude ~/mp-workspace
    """
    from mp_engine.commands.init import init as cmd  # lazy: see the module docstring

    return cmd(directory, remote, branch, click.echo, agents)


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
    from mp_engine.commands.run import run as cmd  # lazy: see the module docstring

    return cmd(root)


@cli.command()
@root_option
@click.option("--temporal", metavar="HOST:PORT", help="Temporal's frontend (default: [fleet] temporal).")
@click.option("--task-queue", metavar="QUEUE", help="The queue to serve (default: [fleet] task_queue).")
@click.option("--max-parallel", type=click.IntRange(1, 64), help="Attempts at once (default: [agent] max_parallel).")
@click.option("--remote", metavar="URL", help="The work repository (default: [fleet] work_remote).")
@click.option("--name", metavar="NAME", help="This worker's name in Temporal and `status` (default: its pid).")
@click.option("--metrics", metavar="HOST:PORT", default="", help="Serve the worker's Prometheus metrics here.")
def worker(root: Path, temporal: str | None, task_queue: str | None, max_parallel: int | None, **more: str) -> int:
    """Run agent tasks for channel engines on this host, through Temporal (docs/FLEET.md).

    The root directory holds the worker's mp-engine.toml: its own [agent] levels and
    credentials, which never travel. Needs the fleet extra: pip install 'mp-engine[fleet]'.

    \b
    Example:
      mp-engine worker --temporal 10.0.0.5:7233 --task-queue mp-engine --max-parallel 2 --root ~/mp-worker
    """
    from mp_engine.commands.worker import worker as cmd  # lazy: see the module docstring

    return cmd(root, temporal, task_queue, max_parallel, more["remote"], more["name"], more["metrics"], click.echo)


@cli.command()
@root_option
def once(root: Path) -> int:
    """Do exactly one pass: run the waiting MP, if any, and exit.

    \b
    Exit codes: 0 completed or nothing to do, 1 the MP ended in ERROR, 2 usage or config
    error, 3 halted (an MP waits for approval), 4 workspace busy, 5 interrupted.

    \b
    Example (cron, or a CI job that runs one MP):
      mp-engine once --root ~/mp-workspace
    """
    from mp_engine.commands.once import once as cmd  # lazy: see the module docstring

    return cmd(root, click.echo)


@cli.command()
@root_option
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.option("--remote", metavar="URL_OR_PATH", help="Read the channel repository instead: its state, the heartbeat.")
@click.option("--branch", default="main", show_default=True, help="With --remote: the branch the engine watches.")
def status(root: Path, as_json: bool, remote: str | None, branch: str) -> int:
    """Show the state, the current MP and step, the last MP, the halt and why, git and the last error.

    With --remote, from anywhere that can reach the channel repository: the state the
    engine last pushed, the MP in the remote's inbox, and whether the engine is up, idle,
    stopped or silent (its heartbeat, docs/PROTOCOL.md).

    \b
    Examples:
      mp-engine status --root ~/mp-workspace
      mp-engine status --json | jq .summary
      mp-engine status --remote git@github.com:me/mp-channel.git
    """
    if remote is not None:
        from mp_engine.commands.remote import remote_status  # lazy: see the module docstring

        return remote_status(remote, branch, as_json, click.echo, _err)
    from mp_engine.commands.status import status as cmd  # lazy: see the module docstring

    return cmd(root, as_json, click.echo, color=sys.stdout.isatty())


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
    from mp_engine.commands.history import history_command as cmd  # lazy: see the module docstring

    return cmd(root, limit, as_json, click.echo)


@cli.command()
@root_option
@click.option(
    "--listen", metavar="HOST:PORT", help="Where to serve it.  [default: [dashboard] listen, or 127.0.0.1:8470]"
)
@click.option("--token", envvar="MP_ENGINE_DASHBOARD_TOKEN", help="Required of every request; needed off loopback.")
def dashboard(root: Path, listen: str | None, token: str | None) -> int:
    """Serve the live dashboard (read-only) in the foreground: the state, a halt and its fix,
    the queue, the running MP's steps or task board, history, tokens and cost.

    \b
    Example:
      mp-engine dashboard --listen 127.0.0.1:8470
    """
    from mp_engine.commands.dashboard.server import dashboard as cmd  # lazy: Starlette only here

    return cmd(root, listen, token, click.echo)


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
    from mp_engine.commands.logs import logs as cmd  # lazy: see the module docstring

    return cmd(root, lines, follow, raw, click.echo)


@cli.command()
@root_option
def doctor(root: Path) -> int:
    """Check the workspace, git, signatures, the host and the agent chain; print one line each.

    Exits 1 if any check fails (warnings do not). Each line that is not ok says the fix.

    \b
    Example:
      mp-engine doctor --root ~/mp-workspace
    """
    from mp_engine.commands.doctor.run import doctor as cmd  # lazy: see the module docstring

    style = (lambda line, fg: click.style(line, fg=fg)) if sys.stdout.isatty() else None
    return cmd(root, click.echo, style)


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
@click.option("--worker", is_flag=True, help="A fleet worker's unit for the worker directory --root (docs/FLEET.md).")
def service_install(root: Path, user_scope: bool, manager: str | None, run_as: str | None, **flags: bool) -> int:
    """Write the unit or plist for the workspace, with this venv's interpreter, and print
    the exact systemctl/launchctl commands that enable it.

    \b
    Examples:
      mp-engine service install --user --root ~/mp-workspace
      sudo .venv/bin/mp-engine service install --root /var/lib/mp-engine/workspace
      mp-engine service install --launchd --root ~/mp-workspace --dry-run
      mp-engine service install --worker --user --root ~/mp-worker
    """
    from mp_engine.commands.service import service_install as cmd  # lazy: see the module docstring

    return cmd(root, user_scope, manager, run_as, flags["dry_run"], click.echo, _err, worker=flags["worker"])


@cli.group()
def notify() -> None:
    """Alerts to a person ([notify]: Apprise URLs, a command)."""


@notify.command("test")
@root_option
def notify_test(root: Path) -> int:
    """Send one test alert to every [notify] target now; exit 1 if one did not take it."""
    from mp_engine.commands.notify import notify_test as cmd  # lazy: see the module docstring

    return cmd(root, click.echo)


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
    from mp_engine.commands.check import check as cmd  # lazy: see the module docstring

    return cmd(file, as_json, max_bytes, click.echo, _err)


@cli.command()
@root_option
def approve(root: Path) -> int:
    """Lift an ERROR halt so the engine takes new MPs again.

    The orchestrator's way is an MP whose header says `Approves: <MP id>`; this is the
    operator's, on the engine host.

    \b
    Example:
      mp-engine approve --root ~/mp-workspace
    """
    from mp_engine.commands.approve import approve as cmd  # lazy: see the module docstring

    return cmd(root, click.echo)


@cli.command()
@root_option
@click.argument("mp_id", metavar="[MP-ID]", required=False)
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for the engine to act.")
def cancel(root: Path, mp_id: str | None, timeout: float) -> int:
    """Cancel the running MP (or MP-ID, running or waiting in the inbox) on this host.

    The running step's whole process group is stopped; the result is CANCELLED and the
    engine goes on without a halt. Exit 0 once the engine has acted, 7 when it has not
    within --timeout (the request stays: a stopped daemon acts on it when it starts).

    \b
    Example:
      mp-engine cancel --root ~/mp-workspace
    """
    from mp_engine.commands.cancel import cancel as cmd  # lazy: see the module docstring

    return cmd(root, mp_id, timeout, click.echo, _err)


@cli.command()
@root_option
@click.argument("mp_id", metavar="MP-ID")
@click.argument("text", required=False)
@click.option("--file", "file", type=click.File("r"), help="Read the answer from this file (`-`: stdin).")
@click.option("--mt", metavar="MT-ID", help="The micro-task answered (default: the one that asked).")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for the engine to act.")
def answer(root: Path, mp_id: str, text: str | None, file, mt: str | None, timeout: float) -> int:
    """Answer the agent MP the engine is halted on because it asked; the same run goes on.

    \b
    Example:
      mp-engine answer MP-2.1 "Use PostgreSQL 16; the password is in ~/.pgpass on the CI host."
    """
    from mp_engine.commands.answer import answer as cmd  # lazy: see the module docstring

    return cmd(root, mp_id, file.read() if file else text or "", mt, timeout, click.echo, _err)


cli.add_command(send)  # the orchestrator's side (cli_orchestrator.py)
cli.add_command(mcp)
cli.add_command(root_option(loop))  # the one-shot loop (cli_loop.py)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for `mp-engine` and `python -m mp_engine`; returns the exit code."""
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="mp-engine", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return ExitCode.USAGE
    except click.Abort:
        return ExitCode.INTERRUPTED
    except MpEngineError as e:
        _err(f"mp-engine: {e}")
        return for_error(e)
    return int(rv) if isinstance(rv, int) else ExitCode.OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
