"""The reducers, in a table keyed by record kind (issue #40): `apply` takes one record, live
or on replay, and returns the effects the run must carry out. `replay` rebuilds the state
from a ledger's records in the order they were applied, so the ledger stays the only truth."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state import ending
from mp_engine.agent.state.answer import reduce_answer
from mp_engine.agent.state.ci import reduce_ci
from mp_engine.agent.state.iteration import reduce_iteration
from mp_engine.agent.state.kinds import Effect, RecordKind
from mp_engine.agent.state.model import RunState
from mp_engine.agent.state.planning import reduce_drift, reduce_plan
from mp_engine.agent.state.prreview import reduce_pr_review
from mp_engine.agent.state.review import reduce_review
from mp_engine.agent.state.tasks import reduce_integration, reduce_start

Reducer = Callable[[RunState, dict[str, Any]], list[Effect]]


def reduce_fatal(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """A call that cannot work (auth, not found, an outage): the run ends BLOCKED with the
    fix its record proposes (call/caller.py `why_fatal`); tasks at once stop with it."""
    fatal = rec["fatal"]
    if s.isolated and rec.get("mt_index") is not None:
        s.focus = rec["mt_index"]
    ending.end(s, cert.BLOCKED, fatal["reason"], fatal["detail"])
    s.fatal_fix = fatal["fix"]
    s.applied += 1
    if s.isolated:
        ending.stop_live(s, f"the agent CLI of another task cannot work ({fatal['reason']})")
    return []


REDUCERS: dict[RecordKind, Reducer] = {
    RecordKind.ITERATION: reduce_iteration,
    RecordKind.PLAN: reduce_plan,
    RecordKind.DRIFT: reduce_drift,
    RecordKind.START: reduce_start,
    RecordKind.INTEGRATE: reduce_integration,
    RecordKind.ANSWER: reduce_answer,
    RecordKind.CI: reduce_ci,
    RecordKind.REVIEW: reduce_review,
    RecordKind.PR_REVIEW: reduce_pr_review,
    RecordKind.FATAL: reduce_fatal,
}


def kind_of(step_kind: str, rec: dict[str, Any]) -> RecordKind:
    """The record's kind: its step's, or FATAL when it says the agent CLI cannot work."""
    return RecordKind.FATAL if rec.get("fatal") else RecordKind(step_kind)


def apply(s: RunState, kind: RecordKind, rec: dict[str, Any]) -> list[Effect]:
    """Account one record. Once the run has ended only an answer, or CI's verdict or a
    review on the pull request its end opened, moves it again."""
    if s.final is not None and kind not in (RecordKind.ANSWER, RecordKind.CI, RecordKind.PR_REVIEW):
        return []
    if kind is RecordKind.ITERATION and "mt" not in rec:
        return []
    return REDUCERS[kind](s, rec)


def replay(s: RunState, records: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Rebuild the state from (step kind, record) pairs, in the order they were applied."""
    for step_kind, rec in records:
        apply(s, kind_of(step_kind, rec), rec)
