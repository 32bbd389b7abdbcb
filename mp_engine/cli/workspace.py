"""Setting up and checking a workspace: `init`, `service install`, `notify test`, `doctor`, `check`.
Each body is `commands/<name>.py`, imported when the command runs (see cli/main.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mp_engine.cli.group import root_option
from mp_engine.core.terminal import say_error as _err


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
@click.option("--remote", metavar="URL", help="Use the git repository at URL as the channel (docs/GIT.md).")
@click.option("--branch", default="main", show_default=True, help="Branch of --remote that carries MPs and results.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="NAME",
    # A bare `--agent` is "" rather than click's "requires an argument": init lists the presets.
    is_flag=False,
    flag_value="",
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


@click.command()
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


@click.group()
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


@click.group()
def notify() -> None:
    """Alerts to a person ([notify]: Apprise URLs, a command)."""


@notify.command("test")
@root_option
def notify_test(root: Path) -> int:
    """Send one test alert to every [notify] target now; exit 1 if one did not take it."""
    from mp_engine.commands.notify import notify_test as cmd  # lazy: see the module docstring

    return cmd(root, click.echo)


@click.command()
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


COMMANDS = (init, service, notify, doctor, check)
