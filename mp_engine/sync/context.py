"""What every part of the git channel shares: the workspace, `[git]`, the event log, the
remote's name and tracking ref, the store, and whether the remote was last reachable."""

from __future__ import annotations

from mp_engine.config.sections import GitConfig
from mp_engine.core.events import EventLog
from mp_engine.core.workspace import Workspace
from mp_engine.inbox.intake import Inbox
from mp_engine.sync.platform import PlatformSigners
from mp_engine.sync.redact import Redactor
from mp_engine.sync.store import SyncStore

PROCESSED_REF = "refs/mp-engine/processed"
BLOCKED_BRANCH = "mp-engine/blocked/{branch}"


class SyncContext:
    def __init__(
        self,
        ws: Workspace,
        cfg: GitConfig,
        *,
        events: EventLog | None = None,
        inbox: Inbox | None = None,
        redact: Redactor | None = None,
    ):
        self.ws = ws
        self.cfg = cfg
        self.redact = redact
        self.events = events if events is not None else EventLog(ws.events_file, redact=redact)
        self.store = SyncStore(ws.local_dir / "gitsync.json")
        self.remote_name = cfg.remote
        self.unreachable: str | None = None  # why the remote could not be reached, or None
        self.inbox = inbox  # the engine's: its queue takes arrivals (None: a channel only read, as status does)
        self.platform: PlatformSigners | None = None  # trusted forge signers (sync/platform.py), set by the channel

    @property
    def tracking(self) -> str:
        return f"refs/remotes/{self.remote_name}/{self.cfg.branch}"

    @property
    def side_branch(self) -> str:
        return BLOCKED_BRANCH.format(branch=self.cfg.branch)

    def mark_unreachable(self, why: str) -> None:
        if self.unreachable is None:
            self.events.emit("sync_unreachable", remote=self.remote_name, error=why)
        self.unreachable = why

    def mark_reachable(self) -> None:
        if self.unreachable is not None:
            self.unreachable = None
            self.events.emit("sync_reachable", remote=self.remote_name)
