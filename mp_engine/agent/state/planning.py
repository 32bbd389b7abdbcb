"""The records of planning rounds and drift checks (issue #17; state/campaign.py says what
they decide): a planning round's answer joins the plan or is refused, a drift check's
verdict goes on, re-plans or ends the run. Replayed from the ledger like every record."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.call.chain import chain_for
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.planner import micro_tasks
from mp_engine.agent.state import approval, campaign, ending
from mp_engine.agent.state.kinds import Effect, TaskStatus
from mp_engine.agent.state.model import Cursor, RunState, TaskState


def reduce_plan(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """One planning answer: valid (its tasks join the plan) or not."""
    c = s.campaign
    s.applied += 1
    s.usage.add(rec, task="plan", level=rec.get("level_name", "planner"))
    where = {"round": rec["round"], "attempt": rec["attempt"]}
    if rec.get("invalid"):
        c.plan_attempt += 1
        c.plan_error = rec["invalid"]
        effects = [Effect.event("campaign_plan_invalid", "MPE-PLAN-INVALID", **where, error=rec["invalid"])]
        if c.plan_attempt >= 2:
            c.pending = None
            s.final = cert.Certificate(
                cert.BLOCKED,
                "invalid_plan",
                "The planner's answer was refused twice"
                + (f" (re-plan {rec['round']})" if rec["round"] else "")
                + f"; the last time: {rec['invalid']}.",
                residual_history=list(s.history),
            )
        return effects
    if rec["round"] > 0:
        _replace_unfinished(s, rec)
    new = micro_tasks(rec["tasks"])
    first = len(s.tasks)
    s.plan = s.plan.extended(new)
    s.chains += [chain_for(s.cfg, t.domain) for t in new]
    s.tasks += [TaskState(t.mt_id, t.title) for t in new]
    c.pending, c.plan_attempt, c.plan_error, c.replan_cause = None, 0, "", None
    if not s.isolated:  # tasks in worktrees of their own start when the scheduler starts them
        before = s.cur
        if not s.cfg.plan_review:  # else when a person approves it (state/approval.py)
            s.tasks[first].status = TaskStatus.ACTIVE
        s.cursors[first] = Cursor(last_digest=before.last_digest, prev_passed=set(before.prev_passed))
    s.focus = first
    done = sum(1 for i in s.current_tasks() if s.tasks[i].status is TaskStatus.COMPLETED)
    c.drift_q = min(3, 4 * done // len(s.current_tasks()))
    planned = [{"mt": r["mt_id"], "ref": r["ref"], "after": r["after"]} for r in rec["tasks"]]
    accepted = [Effect.event("campaign_plan_accepted", "MPE-PLAN", **where, micro_tasks=planned)]
    return accepted + approval.hold(s, first) if s.cfg.plan_review else accepted


def _replace_unfinished(s: RunState, rec: dict[str, Any]) -> None:
    """A re-plan: every task not done is dropped (it never runs again)."""
    for t in s.tasks:
        if t.status is not TaskStatus.COMPLETED and not t.replaced:
            t.replaced = True
            if t.status in (TaskStatus.PENDING, TaskStatus.ACTIVE, TaskStatus.ACCEPTED):
                t.status, t.note = TaskStatus.SKIPPED, f"replaced by re-plan {rec['round']}"
    if s.campaign.replans:
        s.campaign.replans[-1]["tasks"] = [r["mt_id"] for r in rec["tasks"]]


def reduce_drift(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    c = s.campaign
    s.applied += 1
    s.usage.add(rec, task="drift", level=rec.get("level_name", "reflector"))
    c.pending = None
    verdict = rec.get("reflector") or {}
    line = {
        "at": rec["at"],
        "checks": rec["checks"],
        "regressed": rec["regressed"],
        "reflector": verdict.get("verdict"),
        "why": verdict.get("why", ""),
        "drift": rec["drift"],
    }
    c.drift_checks.append(line)
    effects = [Effect.event("campaign_drift_check", "MPE-DRIFT", **line)]
    if not rec["drift"]:
        if rec["at"] == 100:
            c.final_verified = True
            ending.finish(s)
        return effects
    detail = campaign.drift_detail(rec, verdict)
    active = s.task if s.task is not None and s.task.status is TaskStatus.ACTIVE else None
    if s.can_replan():
        return effects + campaign.request_replan(s, "drift", active.mt_id if active else None, "drift", detail)
    if active is not None:
        active.status = TaskStatus.PENDING  # it never ran
    s.final = cert.Certificate(cert.DIVERGED, "drift", detail, residual_history=list(s.history))
    return effects
