"""What one pass of the engine works with (`EngineContext`) and what it returns (`TickResult`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from mp_engine.config import Config
from mp_engine.disk import Reserve
from mp_engine.inbox.intake import Inbox
from mp_engine.record.events import EventLog
from mp_engine.record.state import StateStore
from mp_engine.sync import Channel
from mp_engine.workspace import Workspace


@dataclass(frozen=True)
class TickResult:
    """What one pass did. `action` is one of: idle, waiting, completed, error, halted,
    busy, interrupted, failed."""

    action: str
    mp_id: str | None = None
    run_id: str | None = None
    wait_until: float | None = None  # monotonic time worth waking up at
    detail: str | None = None


@dataclass
class EngineContext:
    """The parts the claim, the run and the finalize share (built once by `Engine`)."""

    ws: Workspace
    config: Config
    events: EventLog
    state: StateStore
    inbox: Inbox
    channel: Channel
    redact: Callable[[str], str]
    reserve: Reserve | None = None  # freed to record a result when the disk is full
    stop: threading.Event = field(default_factory=threading.Event)
    stop_now: threading.Event = field(default_factory=threading.Event)
    finalized: int = 0  # runs finalized by this process (the size of the archives is checked every 10th)
