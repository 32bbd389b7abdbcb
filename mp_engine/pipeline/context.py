"""What one pass of the engine works with (`EngineContext`) and what it returns (`TickResult`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from mp_engine.config.load import Config
from mp_engine.core.disk import Reserve
from mp_engine.core.workspace import Workspace
from mp_engine.execute.steps import StepContext
from mp_engine.record.diagnosis import Diagnosis

if TYPE_CHECKING:
    from mp_engine.agent.api import Suggestion
from mp_engine.core.events import EventLog
from mp_engine.inbox.intake import Inbox
from mp_engine.record.state import StateStore
from mp_engine.sync.channel import Channel
from mp_engine.sync.pull import SyncOutcome


class Action(StrEnum):
    """What one pass did (`TickResult.action`); `mp-engine once` prints it and maps it to
    its exit code."""

    IDLE = "idle"  # nothing to do (or a queued entry found already taken, a duplicate dropped)
    WAITING = "waiting"  # an MP is arriving, or a run waits out a usage limit
    COMPLETED = "completed"  # an MP ended COMPLETED
    ERROR = "error"  # an MP ended in ERROR (refused, failed, a sync problem)
    SUPERSEDED = "superseded"  # a queued MP was replaced before it ran
    CANCELLED = "cancelled"  # an MP was cancelled, before or while it ran
    HALTED = "halted"  # the engine is halted; the MP in the inbox waits for an approval
    BUSY = "busy"  # another process holds the workspace lock
    INTERRUPTED = "interrupted"  # a stop signal paused the run; it resumes on the next start
    FAILED = "failed"  # the pass itself failed (the daemon retries it)


@dataclass(frozen=True)
class TickResult:
    """What one pass did: its `Action`, and the MP and run it was about."""

    action: Action
    mp_id: str | None = None
    run_id: str | None = None
    wait_until: float | None = None  # monotonic time worth waking up at
    detail: str | None = None
    sync: SyncOutcome | None = None  # the sync point the pass ended with, for synced.after_sync to answer


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
    # `[diagnose] level`'s opinion on a failed MP: the agent executor's `advise`, when it is on.
    advise: Callable[[StepContext, Diagnosis, str], Suggestion | None] | None = None
