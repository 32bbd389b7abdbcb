"""One attempt at one micro-task: the agent call of an iteration, the agent's claims and
the task's checks, all in one workspace (`work`), then the iteration's record
(`record`). It decides nothing: the run applies the record (state/apply.py) or, when
the call did not answer, pauses, waits or ends. `work` (the call, the checks and the
evidence) is the unit that runs beside others (each task in its own worktree, in a thread
of its own), or elsewhere (a `Runner`: the fleet runs the call and the checks on a worker
and `judge`s here); the run places each record in one thread, in the order it applies
the records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from mp_engine.agent.call.invoke import Call
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.judge.checks import CheckRun
from mp_engine.agent.judge.claims import parse_claims
from mp_engine.agent.run.parts import WorkspaceParts
from mp_engine.config.agent import AgentLevel
from mp_engine.record.ledger import LedgerStep


@dataclass(frozen=True)
class Attempt:
    """What an attempt is about: the ledger step and evidence of iteration `iteration` of
    micro-task `mt_id` (index `mt_index`) at level `level_index`, and the checks that
    accept the task (indices into the MP's checks)."""

    mt_id: str
    mt_index: int | None  # None: a planning round's or drift check's call
    iteration: int
    level: AgentLevel
    level_index: int
    step: LedgerStep
    ev: IterationEvidence
    accepting: list[int]


@dataclass(frozen=True)
class AttemptOutcome:
    call: Call
    evidence: dict[str, Any] | None = None  # the call answered and the checks ran: the record, unplaced
    checks_interrupted: bool = False  # a second stop signal or a cancel cut the checks short

    @property
    def answered(self) -> bool:
        return self.evidence is not None


def call(parts: WorkspaceParts, a: Attempt) -> Call:
    """The attempt's agent call (a worker's, or a planner's or reflector's)."""
    return parts.caller.call(
        a.level,
        a.ev,
        key=a.step.idempotency_key,
        mt_id=a.mt_id,
        iteration=a.iteration,
        level_index=a.level_index,
        on_spawn=parts.run.steps.on_spawn(a.step),
    )


def work(parts: WorkspaceParts, a: Attempt) -> AttemptOutcome:
    """Call, put back what judges the work, run the checks, judge. Safe to run beside other
    attempts, each in its own workspace."""
    answer = call(parts, a)
    if answer.pauses or answer.ends_run:
        return AttemptOutcome(answer)
    touched = protect(parts, a)
    checks = parts.checker.run(a.accepting, a.step.step_id)
    if checks is None:
        return AttemptOutcome(answer, checks_interrupted=True)
    return judge(parts, a, answer, checks, touched)


def protect(parts: WorkspaceParts, a: Attempt) -> list[str]:
    """The files that judge the work the call changed (issue #42), each put back as the
    base has it: the checks run on the base's copy, and the iteration fails."""
    guard = parts.protected
    touched = guard.touched() if guard is not None else []
    if guard is not None and touched:
        guard.restore(touched)
        parts.run.emit("protected_path_restored", mt=a.mt_id, iteration=a.iteration, paths=touched)
    return touched


def judge(
    parts: WorkspaceParts, a: Attempt, answer: Call, checks: list[CheckRun], protected: list[str] | None = None
) -> AttemptOutcome:
    """The dual gate of an answered call whose checks ran (here, or on a worker of the
    fleet): the agent's claims (marked with the run's `nonce`) AND the checks AND no
    protected file changed (`protected`: those it changed), and the evidence of the
    workspace as the call left it."""
    claims = parse_claims(parts.caller.read_output(a.ev), parts.run.nonce)
    assert a.mt_index is not None
    evidence = parts.recorder.evidence(a, answer, claims, checks, protected or [])
    return AttemptOutcome(answer, evidence)


class Runner(Protocol):
    """Where attempts run: in this engine's threads (`Local`), or on a fleet of workers
    (mp_engine/fleet/dispatch.py). Called from the scheduler's worker threads."""

    def __call__(self, parts: WorkspaceParts, a: Attempt) -> AttemptOutcome: ...

    def where(self, mt_id: str) -> str | None:
        """Where the task's running attempt is, for `status` (None: here)."""
        ...

    def close(self) -> None:
        """The run stops dispatching (it ended or paused)."""
        ...


class Local:
    def __call__(self, parts: WorkspaceParts, a: Attempt) -> AttemptOutcome:
        return work(parts, a)

    def where(self, mt_id: str) -> str | None:
        return None

    def close(self) -> None:
        pass


def record(parts: WorkspaceParts, a: Attempt, out: AttemptOutcome, seq: int) -> dict[str, Any]:
    """The iteration's record placed in the run; `seq`: the order the run applies it in."""
    assert out.evidence is not None
    return parts.recorder.iteration(out.evidence, a.step, seq=seq)
