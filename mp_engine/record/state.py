"""SESSION_STATE.json: the MP-1.3 state record, read and written only through here.

The five MP-1.3 fields are always present. Extra fields (`run_id`, `halt`, `last_result`,
`daemon`) carry what the engine needs to resume and explain itself; readers that know only
MP-1.3 ignore them. Every write is atomic (see `atomic.py`) and every change of `status`
or `current` is appended to the event log.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mp_engine import __version__
from mp_engine.core.atomic import atomic_write_json
from mp_engine.core.clock import now_iso
from mp_engine.core.errors import StateError
from mp_engine.core.events import EventLog
from mp_engine.record.stateview import read_state_json

IDLE = "IDLE"


class Status(StrEnum):
    ONLINE = "ONLINE"
    RUNNING = "RUNNING"
    ERROR = "ERROR"
    OFFLINE = "OFFLINE"


class Halt(BaseModel):
    """Why the engine stopped taking new MPs, and what lifts it."""

    model_config = ConfigDict(extra="allow")
    mp_id: str
    run_id: str | None = None
    reason: str
    since: str


class SessionState(BaseModel):
    model_config = ConfigDict(extra="allow")

    engine_version: str = __version__
    last_completed: str | None = None
    current: str = IDLE
    status: Status = Status.OFFLINE
    last_updated: str = ""
    run_id: str | None = None
    halt: Halt | None = None
    last_result: dict[str, Any] | None = None
    # An agent run paused by a rate or usage limit: {kind, reason, resume_at}; the run stays
    # open (status RUNNING) and resumes at resume_at (docs/AGENT.md).
    waiting: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class StateStore:
    """Reads and atomically writes SESSION_STATE.json, logging each transition."""

    def __init__(self, path: Path, events: EventLog):
        self.path = Path(path)
        self.events = events
        # The last state read or written, keyed by the file's (inode, mtime, size): every
        # write replaces the inode, so a state written by anyone else is always re-read.
        self._cache: tuple[tuple[int, int, int, int], SessionState] | None = None

    def _signature(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)

    def read(self) -> SessionState:
        sig = self._signature()
        if sig is not None and self._cache is not None and self._cache[0] == sig:
            return self._cache[1].model_copy(deep=True)
        raw = read_state_json(self.path)
        try:
            state = SessionState.model_validate(raw)
        except ValidationError as e:
            raise StateError(f"{self.path} does not hold valid MP-1.3 fields: {e}. Restore it from git.") from e
        if sig is not None:
            self._cache = (sig, state.model_copy(deep=True))
        return state

    def write(self, state: SessionState, *, reason: str | None = None, durable: bool = True) -> SessionState:
        """Write `state` (stamping version and time); log it if status or current changed.
        Always atomic with its content fsynced (never torn or empty, even after a power
        loss); `durable=False` skips the directory's fsync, for a state that a power loss
        may take back to the one before (the engine's start and stop, the claim)."""
        try:
            old = self.read()
        except StateError:
            old = None
        state = state.model_copy(update={"last_updated": now_iso(), "engine_version": __version__})
        atomic_write_json(self.path, state.to_json(), dir_sync=durable)
        if (sig := self._signature()) is not None:
            self._cache = (sig, state.model_copy(deep=True))
        if old is None or (old.status, old.current) != (state.status, state.current):
            self.events.emit(
                "state_changed",
                from_status=old.status.value if old else None,
                to_status=state.status.value,
                from_current=old.current if old else None,
                to_current=state.current,
                reason=reason,
            )
        return state

    def update(self, *, reason: str | None = None, durable: bool = True, **changes: Any) -> SessionState:
        """Read, apply `changes`, write (`durable`: as in `write`); returns the new state."""
        state = self.read().model_copy(update=changes)
        # model_copy skips validation; round-trip so nested dicts become models again.
        state = SessionState.model_validate(state.model_dump())
        return self.write(state, reason=reason, durable=durable)
