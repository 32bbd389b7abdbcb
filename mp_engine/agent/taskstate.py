"""What the loop's state is made of: one micro-task's state, and an effect the executor
carries out (an event, a distillation) when the state decides; `Emit`, how the run's
parts emit an event."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Emit = Callable[..., None]  # emit(name, event_id, **fields): an event of this run


@dataclass
class Effect:
    kind: str  # "event" or "distill"
    name: str = ""  # event name
    event_id: str = ""  # FR-EVT-MT-xxx
    fields: dict[str, Any] = field(default_factory=dict)


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
            "evidence": [r["evidence"] for r in self.records],
        }
