"""One attempt at one micro-task: the agent call of an iteration, the agent's claims, the
task's checks and the iteration's record, all in one workspace. It decides nothing: the
run applies the record (`LoopState.apply`) or, when the call did not answer, pauses,
waits or ends. This is the unit that can run beside others (each task in its own
worktree), and elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mp_engine.agent.claims import parse_claims
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.invoke import Call
from mp_engine.agent.ledgersteps import AgentSteps
from mp_engine.agent.parts import WorkspaceParts
from mp_engine.config import AgentLevel
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
class Outcome:
    call: Call
    record: dict[str, Any] | None = None  # the iteration's record: the call answered, the checks ran
    checks_interrupted: bool = False  # a second stop signal or a cancel cut the checks short


def call(parts: WorkspaceParts, steps: AgentSteps, a: Attempt) -> Call:
    """The attempt's agent call (a worker's, or a planner's or reflector's)."""
    return parts.caller.call(
        a.level,
        a.ev,
        key=a.step.idempotency_key,
        mt_id=a.mt_id,
        iteration=a.iteration,
        level_index=a.level_index,
        on_spawn=steps.on_spawn(a.step),
    )


def attempt(parts: WorkspaceParts, steps: AgentSteps, a: Attempt, nonce: str) -> Outcome:
    """Call, read the claims (marked with the run's `nonce`), run the checks, record."""
    answer = call(parts, steps, a)
    if answer.pauses or answer.ends_run:
        return Outcome(answer)
    claims = parse_claims(parts.caller.read_output(a.ev), nonce)
    checks = parts.checker.run(a.accepting, a.step.step_id)
    if checks is None:
        return Outcome(answer, checks_interrupted=True)
    assert a.mt_index is not None
    record = parts.recorder.iteration(
        mt_id=a.mt_id,
        mt_index=a.mt_index,
        iteration=a.iteration,
        level_index=a.level_index,
        level=a.level,
        step=a.step,
        ev=a.ev,
        call=answer,
        claims=claims,
        checks=checks,
    )
    return Outcome(answer, record)
