"""Before anything more of a run starts: SYSTEM/STOP, a disk fuller than `[agent]
max_disk_used` (Phuc's disk-usage backpressure), the time budget and the iteration cap end
the run (saying what it was about to do); a task marked `(pause)` that one-at-a-time
work reaches ends it for a person to look (issue #34). One guard for 1..N tasks: what
already runs finishes and is recorded first (the scheduler waits for it)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.scope import RunScope
from mp_engine.agent.state import ending
from mp_engine.agent.state.model import RunState
from mp_engine.core import disk

STOPPED = "a stop signal (SIGTERM/SIGINT); the loop resumes when the engine restarts"


class Halt(threading.Event):
    """The stop event of a run's work: set by the run (its end) and set whenever the
    engine's own `stop_now` is (a cancel, a second signal), so every part built with it,
    a planning round's call in the scheduler's own thread included, stops at once."""

    SLICE = 0.05  # seconds between looks at the engine's event while waiting

    def __init__(self, outer: threading.Event):
        super().__init__()
        self.outer = outer

    def is_set(self) -> bool:
        return super().is_set() or self.outer.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = self.SLICE if end is None else min(self.SLICE, end - time.monotonic())
            if left <= 0:
                return False
            super().wait(left)
        return True


@dataclass(frozen=True)
class Stop:
    """Why the run must end before anything more starts."""

    type: str  # the certificate
    reason: str
    detail: str
    pause_before: int | None = None  # a task marked `(pause)`: the run pauses before it


def due(run: RunScope, state: RunState) -> Stop | None:
    """Whether the run must end before anything more of it starts."""
    ws, budget, cap = run.ws, run.budget, run.cfg.max_iterations
    what, when = _about(state)
    if ws.stop_file.exists():
        return Stop(
            cert.BACKPRESSURE, "stop_file", f"{ws.rel(ws.stop_file)} was found{when}; the loop stopped as asked."
        )
    if (used := disk.used_fraction(ws.root)) is not None and used > run.cfg.max_disk_used:
        return Stop(
            cert.BACKPRESSURE,
            "disk_usage",
            f"The workspace's file system, {disk.describe(ws.root)}, is {used:.0%} used, above `[agent] "
            f"max_disk_used` ({run.cfg.max_disk_used:.0%}){when}; the loop stopped before it fills.",
        )
    if budget.remaining() <= 0:
        return Stop(
            cert.TIMEOUT,
            "wall_budget",
            f"The {budget.total:g} s budget ({budget.describe}) was spent before {what} passed.",
        )
    if state.total >= cap:
        return Stop(
            cert.TIMEOUT,
            "max_iterations",
            f"All {cap} iterations (`[agent] max_iterations`) were spent before {what} passed.",
        )
    one_at_a_time = not state.isolated and state.campaign.pending is None and state.task is not None
    if one_at_a_time and state.pause_due(state.focus):
        return Stop(cert.BLOCKED, "pause_point", "", pause_before=state.focus)
    return None


def end(state: RunState, stop: Stop) -> None:
    """End the run as `stop` says."""
    if stop.pause_before is not None:
        ending.pause_before(state, stop.pause_before)
    else:
        ending.end(state, stop.type, stop.reason, stop.detail)


def _about(state: RunState) -> tuple[str, str]:
    """What the run was about to do: (the work that did not pass, " before ..." for STOP).
    Tasks in worktrees of their own: every micro-task; one at a time: the task in focus,
    or the plan when a planning round or a drift check comes first."""
    if state.isolated:
        return "every micro-task", ""
    task = state.task if state.campaign.pending is None else None
    if task is None:
        return "the plan", " before the plan"
    return task.mt_id, f" before {task.mt_id} iteration {state.next_iteration}"
