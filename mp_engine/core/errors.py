"""The one error tree of mp-engine.

Every error raised on purpose derives from `MpEngineError`. Messages say what to do
next and carry the evidence (the path, the command, its exit code, its stderr). The CLI
maps each class to an exit code in one place (`cli.main`, with the codes of `exitcodes.py`).
"""

from __future__ import annotations


class MpEngineError(Exception):
    """Root of every error mp-engine raises on purpose."""


class ConfigError(MpEngineError):
    """mp-engine.toml, an MP_ENGINE_* override or a command's option is invalid."""


class WorkspaceError(MpEngineError):
    """The workspace layout is missing or damaged."""


class StateError(MpEngineError):
    """SESSION_STATE.json cannot be read or does not hold the MP-1.3 fields."""


class LockTimeout(MpEngineError):
    """Another engine held the workspace lock for longer than the lock timeout."""


class DaemonRunning(LockTimeout):
    """Another daemon already serves this workspace (`run` exits 4 at once)."""


class InvalidMPError(MpEngineError):
    """An MP file cannot be accepted; carries the reason and exactly one fix."""

    def __init__(self, reason: str, fix: str, *, line: int | None = None, mp_id: str | None = None):
        self.reason = reason
        self.fix = fix
        self.line = line
        self.mp_id = mp_id
        where = f" (line {line})" if line else ""
        super().__init__(f"{reason}{where}. Fix: {fix}")


class ConfinementError(MpEngineError):
    """A path named by an MP would leave the workspace or touch an engine-owned file."""


class ProcessError(MpEngineError):
    """A child process could not be started."""


class SyncError(MpEngineError):
    """A git operation against the workspace repository or its remote failed."""


class GitConfigChanged(SyncError):
    """The repository's .git/config is not the one the engine accepted (an MP's step, or a
    person, changed it): the engine runs no git in that repository until it is resolved."""


class RemoteUnreachable(SyncError):
    """The git remote could not be reached; results stay committed locally until it returns."""


class CredentialsRefused(SyncError):
    """The remote refused the engine's credentials (a token without the permission, a key
    not allowed): trying again changes nothing; the message names the fix."""


class BranchMissing(SyncError):
    """The remote has no such branch (a `Base:` or `[repos.NAME] base` that does not exist)."""


class SyncConflict(SyncError):
    """Local result commits cannot be rebased onto the remote; carries the conflicting paths."""

    def __init__(self, message: str, paths: list[str]):
        self.paths = paths
        super().__init__(message)


class LocalEditsInTheWay(SyncConflict):
    """Uncommitted edits on the engine host, in paths the remote changed, cannot be carried over."""


class SandboxUnavailable(ConfigError):
    """`[agent] sandbox = "os"` on a host where bubblewrap cannot run (docs/AGENT.md): the
    engine does not start rather than run agents unsandboxed."""


class FleetUnreachable(ConfigError):
    """`[fleet] temporal` names a Temporal server that did not answer (docs/FLEET.md)."""


class ForgeError(MpEngineError):
    """A call to a forge's API (GitHub) failed; the message names the call and what to do."""


class ForgeUnavailable(ForgeError):
    """The forge could not be reached, or answered 5xx, after the retries: the engine tries
    again later and loses nothing."""


class ForgeAuthError(ForgeError):
    """The forge refused the token (401), or the token lacks a permission (403); carries
    the permission the call needs."""

    def __init__(self, message: str, needs: str = ""):
        self.needs = needs
        super().__init__(message)


class ForgeRateLimited(ForgeError):
    """The forge's rate limit (primary, or secondary with Retry-After) is reached: nothing
    is sent before `until` (seconds since the epoch)."""

    def __init__(self, message: str, until: float, *, secondary: bool):
        self.until = until
        self.secondary = secondary
        super().__init__(message)


class ForgeNotFound(ForgeError):
    """The forge has no such repository, pull request or issue, or the token cannot see it."""


class BranchMoved(SyncError):
    """The work branch on the remote is not where the engine left it: someone else pushed
    (a force-push by a person). The engine stops rather than overwrite their work."""
