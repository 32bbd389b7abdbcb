"""The command line: `main(argv)`, the group with every command, and the one place that
maps errors to exit codes (the table itself is `core/exitcodes.ExitCode`; README.md lists it).

The commands are grouped by what a person does with them (workspace.py, engine.py,
inspect.py, orchestrator.py); each body is `commands/<name>.py` (or client/, web/),
imported inside the click function so that `--help`, `status` and `check` do not import the
daemon, watchdog or the agent loop they do not use (bench figure 8).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from mp_engine.cli import engine, inspect, orchestrator, workspace
from mp_engine.cli.group import cli
from mp_engine.core.errors import MpEngineError
from mp_engine.core.exitcodes import ExitCode, for_error
from mp_engine.core.terminal import say_error as _err

for command in (*workspace.COMMANDS, *engine.COMMANDS, *inspect.COMMANDS, *orchestrator.COMMANDS):
    cli.add_command(command)


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
