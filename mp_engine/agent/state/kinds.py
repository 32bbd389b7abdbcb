"""The names an agent run's state is made of, as enums a type checker can count: what a
record is (`RecordKind`, keyed to its reducer), where a task stands (`TaskStatus`), what
comes before the next iteration (`Pending`), and what the run must do about a decision
(`Effect`, of an `EffectKind`). Each is a `StrEnum`, so the ledger, the progress file and
the result keep the same strings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class RecordKind(StrEnum):
    """What a ledger record is about: the kind of its step; `FATAL` is an iteration's (or a
    planning round's, a drift check's) record that says the agent CLI cannot work."""

    ITERATION = "agent"
    PLAN = "plan"
    DRIFT = "drift"
    START = "start"
    INTEGRATE = "integrate"
    ANSWER = "answer"
    CI = "ci"  # CI's verdict on a push of the work branch, on a pull request (issue #41)
    REVIEW = "review"  # the reviewer's verdict on the verified work (issue #42)
    PR_REVIEW = "pr_review"  # comments on that pull request from people who may steer (issue #41)
    FATAL = "fatal"


# The kinds of ledger step whose records the state is replayed from.
REPLAYED = frozenset(k.value for k in RecordKind if k is not RecordKind.FATAL)


class TaskStatus(StrEnum):
    PENDING = "pending"  # not started
    ACTIVE = "active"  # its iterations run
    ACCEPTED = "accepted"  # its dual gate passed in a worktree of its own: waiting for integration
    COMPLETED = "completed"  # passed (and integrated)
    BLOCKED = "blocked"  # the agent is blocked, or the hard gate: a person must act
    FAILED = "failed"  # its chain gave up, or the run ended while it ran
    SKIPPED = "skipped"  # never ran: it needed a task that did not pass, or a re-plan replaced it


LIVE = (TaskStatus.ACTIVE, TaskStatus.ACCEPTED)  # started and not yet ended
DEAD = (TaskStatus.FAILED, TaskStatus.BLOCKED, TaskStatus.SKIPPED)  # did not pass: no later task is held to its checks


class Pending(StrEnum):
    """A step that comes before the next iteration."""

    PLAN = "plan"  # a planning round
    DRIFT = "drift"  # a drift check
    REVIEW = "review"  # the reviewer reviews the verified work before it lands (issue #42)


class EffectKind(StrEnum):
    EVENT = "event"  # emit an event
    DISTILL = "distill"  # write the task's distillation candidate
    COMMIT = "commit"  # a task done in the run's worktree: its one commit on the work branch
    INTEGRATE = "integrate"  # an accepted task waits for integration (the scheduler integrates one at a time)
    REFRESH = "refresh"  # the task's worktree starts over from the tip of mp/<MP-id>


@dataclass(frozen=True)
class Effect:
    """What the run must do about a decision; the state never acts itself."""

    kind: EffectKind
    name: str = ""  # the event's name
    event_id: str = ""  # FR-EVT-MT-xxx
    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def event(cls, name: str, event_id: str, **fields: Any) -> Effect:
        return cls(EffectKind.EVENT, name, event_id, fields)

    @classmethod
    def on_task(cls, kind: EffectKind, mt_index: int) -> Effect:
        return cls(kind, fields={"mt_index": mt_index})


Emit = Callable[..., None]  # emit(name, event_id, **fields): an event of this run
