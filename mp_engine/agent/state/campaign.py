"""Plans and drift (issue #17): when a re-plan or a drift check is due (the reducers of
their records are in planning.py). What they decide:

- A plan (`Plan: auto`): the planner's validated tasks join the plan and the run goes on
  with the first of them. An invalid answer is asked again once (`plan_error` goes into
  the next prompt); a second invalid answer ends the MP BLOCKED `invalid_plan`.
- A re-plan: a task that exhausts its chain (hard gate, or divergence at its last level),
  or drift, asks the planner again, at most `[agent] max_replans` times. The tasks not done
  are dropped (SKIPPED, "replaced by re-plan N") and the new plan's tasks follow.
- Drift checks: at 25 %, 50 % and 75 % of a plan's tasks done (one check when a task
  passes several marks), and, in a planned MP, once more when every task passed (the MP's
  every check: EXACT is the whole MP). A regressed check, or the reflector's `drifted`,
  is drift: a re-plan, or DIVERGED `drift` when none is left.
"""

from __future__ import annotations

from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state.kinds import Effect, Pending, TaskStatus
from mp_engine.agent.state.model import RunState


def exhausted(type_: str, reason: str) -> bool:
    """The task's chain gave up: the hard gate, or a divergence or breaker at its last level."""
    return reason == "hard_gate" or type_ == cert.DIVERGED


def request_replan(s: RunState, kind: str, mt: str | None, reason: str, detail: str) -> list[Effect]:
    c = s.campaign
    c.plan_round += 1
    c.pending, c.plan_attempt, c.plan_error = Pending.PLAN, 0, ""
    c.replan_cause = {"kind": kind, "mt": mt, "reason": reason, "detail": detail}
    c.replans.append({"round": c.plan_round, "cause": kind, "mt": mt, "reason": reason, "detail": detail})
    return [
        Effect.event(
            "campaign_replan_requested", "MPE-PLAN-REPLAN", round=c.plan_round, cause=kind, mt=mt, reason=reason
        )
    ]


def drift_due(s: RunState) -> None:
    """After a task passed: a drift check when it crossed a quarter mark of the plan."""
    c = s.campaign
    if c.pending is not None or s.final is not None or not (c.planned or s.cfg.reflector):
        return
    current = s.current_tasks()
    done = sum(1 for i in current if s.tasks[i].status is TaskStatus.COMPLETED)
    q = min(3, 4 * done // len(current))
    if q > c.drift_q:
        c.drift_q, c.pending, c.drift_at = q, Pending.DRIFT, 25 * q


def verify_at_end(s: RunState) -> bool:
    """Every task passed in a planned MP: the final drift check (all the MP's checks)
    comes first. True when it is now pending."""
    c = s.campaign
    if c.planned and s.verified and not c.final_verified:
        c.pending, c.drift_at = Pending.DRIFT, 100
        return True
    return False


def review_due(s: RunState) -> bool:
    """Every task passed and the checks verified it: with `[agent.reviewer]`, the reviewer
    reviews the work before it lands (issue #42; state/review.py), until it approves. True
    when the review is now pending."""
    c = s.campaign
    if s.cfg.reviewer is None or not s.verified or c.review_approved:
        return False
    c.pending = Pending.REVIEW
    return True


def drift_detail(rec: dict[str, Any], verdict: dict[str, Any]) -> str:
    drifted = verdict.get("verdict") == "drifted"
    return (
        f"Drift at {rec['at']} %: "
        + (f"{', '.join(rec['regressed'])} regressed" if rec["regressed"] else "")
        + ("; " if rec["regressed"] and drifted else "")
        + (f"the reflector says the work drifted: {verdict.get('why')}" if drifted else "")
        + "."
    )
