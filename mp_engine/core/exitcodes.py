"""The one table of exit codes (README.md, "Exit codes"). `cli.main` maps errors to them;
commands return them. Kept out of cli.py because the commands, `send` and the daemon's
stall limit need them, and cli.py imports the commands."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # success, or nothing to do; `send --wait`: COMPLETED
    MP_ERROR = 1  # the MP ended in ERROR (`once`, `send --wait`), is invalid (`check`), or `doctor` failed
    USAGE = 2  # usage, configuration or workspace error (nothing was started)
    HALTED = 3  # `once`: an MP is waiting but the engine is halted on a failed MP
    BUSY = 4  # `once`/`approve`: the workspace lock was held past its timeout; `run`: a daemon already runs there
    INTERRUPTED = 5  # `once`: stopped by a signal before the MP finished; it resumes on the next start
    NOT_RUNNABLE = 6  # `send`: the engine is halted and the MP does not approve the halt (nothing sent; --force)
    SEND_TIMEOUT = 7  # `send --wait`: no result before --timeout (the MP stays sent)
    GIT = 8  # `send`: git failed (clone, fetch or push); the message says why
    STALLED = 9  # `run`: the main loop stalled past [watch] stall_limit; the service manager restarts it


def for_error(e: BaseException) -> ExitCode:
    """The exit code of an mp-engine error that ended a command (cli.main, entry.main)."""
    from mp_engine.core.errors import ConfigError, LockTimeout, StateError, WorkspaceError

    if isinstance(e, ConfigError | WorkspaceError | StateError):
        return ExitCode.USAGE
    if isinstance(e, LockTimeout):
        return ExitCode.BUSY
    return ExitCode.MP_ERROR
