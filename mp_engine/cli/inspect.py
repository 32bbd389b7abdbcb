"""Reading what the engine did: `status`, `history`, `logs`, and the `dashboard` in a browser.
Each body is `commands/<name>.py` (the dashboard: web/), imported when it runs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mp_engine.cli.group import root_option
from mp_engine.core.terminal import say_error as _err


@click.command()
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
        from mp_engine.client.remote import remote_status  # lazy: see the module docstring

        return remote_status(remote, branch, as_json, click.echo, _err)
    from mp_engine.commands.status import status as cmd  # lazy: see the module docstring

    return cmd(root, as_json, click.echo, color=sys.stdout.isatty())


@click.command()
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


@click.command()
@root_option
@click.option(
    "--listen", metavar="HOST:PORT", help="Where to serve it.  [default: [dashboard] listen, or 127.0.0.1:8470]"
)
@click.option(
    "--token",
    envvar="MP_ENGINE_DASHBOARD_TOKEN",
    help="Required of every request; needed off loopback. On the command line it shows in `ps` to every user "
    "of the host: prefer $MP_ENGINE_DASHBOARD_TOKEN or --token-file.",
)
@click.option(
    "--token-file", type=click.Path(dir_okay=False, path_type=Path), help="A file (mode 0600) holding the token."
)
@click.pass_context
def dashboard(ctx: click.Context, root: Path, listen: str | None, token: str | None, token_file: Path | None) -> int:
    """Serve the live dashboard (read-only) in the foreground: the state, a halt and its fix,
    the queue, the running MP's steps or task board, history, tokens and cost.

    \b
    Example:
      mp-engine dashboard --listen 127.0.0.1:8470
    """
    from mp_engine.web.server import dashboard as cmd  # lazy: Starlette only here

    if ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE:
        _err("mp-engine dashboard: warning: --token shows in `ps`; prefer $MP_ENGINE_DASHBOARD_TOKEN or --token-file")
    return cmd(root, listen, token, click.echo, token_file)


@click.command("logs")
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


COMMANDS = (status, history, logs_command, dashboard)
