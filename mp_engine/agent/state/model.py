"""What the loop's state is made of: one micro-task's state, and an effect the executor
carries out (an event, a distillation) when the state decides; `Emit`, how the run's
parts emit an event."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mp_engine.agent.judge.breakers import Breakers

Emit = Callable[..., None]  # emit(name, event_id, **fields): an event of this run


@dataclass
class Effect:
    kind: str  # "event" or "distill"
    name: str = ""  # event name
    event_id: str = ""  # FR-EVT-MT-xxx
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Cursor:
    """Where a micro-task stands in its chain: the level, the failures there, the residual
    trend, the breakers, the done signals, and what the last iteration left (to tell
    progress). Sequential runs keep one, carried from task to task; parallel tasks one
    each."""

    level: int = 0
    fails_at_level: int = 0
    trend: list[int] = field(default_factory=list)  # residuals at this level
    breakers: Breakers = field(default_factory=Breakers)
    done_streak: int = 0  # iterations in a row the agent claimed the task done
    last_digest: str | None = None  # the workspace fingerprint after the last iteration
    prev_passed: set[str] = field(default_factory=set)

    def restart(self) -> None:
        """A fresh start at a new level or on a new task: counters and trend reset."""
        self.fails_at_level, self.trend, self.done_streak = 0, [], 0
        self.breakers.reset()


@dataclass
class TaskState:
    mt_id: str
    title: str
    status: str = "pending"  # pending | active | completed | blocked | failed
    iterations: int = 0
    levels: list[int] = field(default_factory=list)
    final_level: int | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""  # why it was skipped
    replaced: bool = False  # a re-plan replaced it (it did not pass, or never ran)
    # Parallel tasks (docs/AGENT.md): when it ran, its integration failures, alone at last.
    started_at: str | None = None
    ended_at: str | None = None
    overlapped_with: list[str] = field(default_factory=list)
    starts: int = 0  # worktrees it started in (a refresh starts it again)
    base: str | None = None  # the commit of mp/<MP-id> its worktree started from
    refresh_due: bool = False  # its work did not integrate: its worktree starts over from the tip
    integration_failures: int = 0
    solo: bool = False  # integrated only when no other task runs (max_integration_retries spent)
    answers: list[dict[str, str]] = field(default_factory=list)  # what it asked and a person answered

    def to_dict(self) -> dict[str, Any]:
        return {
            "mt_id": self.mt_id,
            "title": self.title,
            "status": self.status,
            "iterations": self.iterations,
            "levels": self.levels,
            "final_level": self.final_level,
            "note": self.note,
            "replaced": self.replaced,
            "residuals": [r["residual"] for r in self.records],
            "level_names": [r.get("level_name") for r in self.records],
            "evidence": [r["evidence"] for r in self.records],
            **(
                {"started_at": self.started_at, "ended_at": self.ended_at, "overlapped_with": self.overlapped_with}
                if self.started_at
                else {}
            ),
            **({"workers": self.workers} if self.workers else {}),
            **({"answers": self.answers} if self.answers else {}),
        }

    @property
    def workers(self) -> list[str]:
        """The fleet's workers its iterations ran on, in order (docs/FLEET.md)."""
        return [r["worker"] for r in self.records if r.get("worker")]
