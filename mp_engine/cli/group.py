"""The `mp-engine` click group and the `--root` option its commands share."""

from __future__ import annotations

from pathlib import Path

import click

from mp_engine import __version__
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
