"""The steps between iterations (issue #17): what a planning round and a drift check
decide from, and the records they leave.

A planning round is ledger step `PLAN-<n>_iter-<attempt>` (kind `plan`), a drift check
`DRIFT-<n>` (kind `drift`); each one's artifact is the record state/planning.py takes, so after a crash the ledger replays them with the iterations. The
planner's and the reflector's calls go through the same `Caller` as a worker's (retries,
usage limits, the hourly limit, scrubbed environment), with their evidence under
`agent/PLAN-<n>/` and `agent/DRIFT-<n>/`. sidesteps.py runs them.
"""

from __future__ import annotations

from typing import Any

from mp_engine.agent.call.invoke import Call
from mp_engine.agent.judge.claims import parse_verdict
from mp_engine.agent.plan import planner as planning
from mp_engine.agent.state.kinds import TaskStatus
from mp_engine.agent.state.model import RunState
from mp_engine.inbox.mpfile import MicroProject


def plan_round(state: RunState) -> tuple[str, int]:
    """(name, attempt) of the pending planning round: `PLAN-2`, attempt 1."""
    return f"PLAN-{state.campaign.plan_round + 1}", state.campaign.plan_attempt + 1


def plan_record(
    state: RunState, answer: str, nonce: str, mp: MicroProject, call: Call, attempt: int, evidence: str
) -> dict[str, Any]:
    """The planner's answer, validated: its tasks, or why it was refused."""
    rec: dict[str, Any] = {"round": state.campaign.plan_round, "attempt": attempt, "evidence": evidence}
    try:
        raw = planning.extract(answer, nonce)
        rec["tasks"] = planning.validate(raw, mp, state.completed_ids(), len(state.tasks) + 1)
    except planning.PlanInvalid as e:
        ended = f" (the planner's call ended `{call.kind}`: {call.detail})" if call.kind != "ok" else ""
        rec["invalid"] = str(e) + ended
    return rec


def drift_check(state: RunState) -> tuple[str, int]:
    """(name, mark in percent) of the pending drift check: `DRIFT-3`, 75."""
    return f"DRIFT-{len(state.campaign.drift_checks) + 1}", state.campaign.drift_at


def drift_checks(state: RunState, mp: MicroProject, at: int) -> list[int]:
    """The checks a drift check at `at` % runs again: at 100 %, all of the MP's (a planned
    MP's final check); in a planned MP, those of every completed task; in a listed MP
    none (each task is already held to the earlier ones' checks; the reflector asks)."""
    if at == 100:
        return list(range(len(mp.checks)))
    if not state.campaign.planned:
        return []
    completed = (i for i in state.current_tasks() if state.tasks[i].status is TaskStatus.COMPLETED)
    return sorted({k for i in completed for k in state.plan.accepting(i)})


def drift_record(at: int, ran: list[str], regressed: list[str]) -> dict[str, Any]:
    """A drift check's record before the reflector answers (`reflected` adds its verdict)."""
    return {"at": at, "checks": ran, "regressed": regressed, "reflector": None, "drift": bool(regressed)}


def reflected(rec: dict[str, Any], answer: str, nonce: str, evidence: str) -> dict[str, Any]:
    """The record with the reflector's verdict: `drifted` is drift too; no answer is not."""
    verdict = parse_verdict(answer, nonce)
    drift = bool(rec["regressed"]) or (verdict or {}).get("verdict") == "drifted"
    return {**rec, "reflector": verdict, "evidence": evidence, "drift": drift}
