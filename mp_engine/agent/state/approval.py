"""Plan approval (issue #42): with `Plan: review` (or `[agent] plan_review`), each plan the
planner makes waits for a person before any of its tasks starts. The run ends BLOCKED
`plan_review`, its plan in the result; a person's answer (inbox/answer.py, kind `answer`,
on the task id `PLAN`) moves it on:

- `approve`: the plan's first task starts (tasks at once: the scheduler starts them);
- `cancel`: the run ends, cancelled (BACKPRESSURE `plan_cancelled`; nothing landed);
- anything else: guidance the planner re-plans with (a re-plan, within `[agent] max_replans`),
  and the new plan waits again. With no re-plan left the plan waits on, for `approve` or
  `cancel`, saying so.

Replayed from the ledger like every record, so a restart at any point keeps the pending
approval.
"""

from __future__ import annotations

from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state import campaign
from mp_engine.agent.state.kinds import Effect, TaskStatus
from mp_engine.agent.state.model import RunState

PLAN_MT = "PLAN"  # the task id an answer to a plan carries (no micro-task has it)
APPROVE, CANCEL = ("approve", "approved"), ("cancel", "cancelled")


def hold(s: RunState, first: int) -> list[Effect]:
    """The plan whose tasks start at `first` waits for a person: the run ends BLOCKED
    `plan_review` (nothing of it started)."""
    c = s.campaign
    c.awaiting, c.plan_first = True, first
    s.final = cert.Certificate(cert.BLOCKED, "plan_review", describe(s), residual_history=list(s.history))
    tasks = [s.tasks[i].mt_id for i in s.current_tasks() if s.tasks[i].status is TaskStatus.PENDING]
    return [Effect.event("campaign_plan_review", "MPE-PLAN-REVIEW", round=c.plan_round, micro_tasks=tasks)]


def describe(s: RunState, note: str = "") -> str:
    """The plan that waits, one line per task, and what an answer does."""
    c = s.campaign
    lines = []
    for i in range(c.plan_first, len(s.tasks)):
        after = sorted(s.tasks[n].mt_id for n in s.plan.needs(i))
        line = f"{s.tasks[i].mt_id}: {s.tasks[i].title.rstrip('.')}"
        line += f" (after {', '.join(after)})" if after else ""
        line += " (it pauses before it)" if s.plan.tasks[i].pause else ""
        lines.append(line)
    left = s.cfg.max_replans - len(c.replans)
    guidance = (
        f"any other text is guidance the planner re-plans with ({left} re-plan(s) left)"
        if left > 0
        else "no re-plan is left (`[agent] max_replans`), so other text changes nothing"
    )
    which = f"Re-plan {c.plan_round}" if c.plan_round else "The plan"
    return (
        f"{which} ({len(lines)} micro-task(s)) waits for approval before any task starts: {'; '.join(lines)}. "
        f"Answer `approve` to start it, `cancel` to end the MP; {guidance}." + (f" {note}" if note else "")
    )


def reduce_plan_answer(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """`rec`: the answer step's record (`mt` = PLAN, `answer`, `source`)."""
    s.applied += 1
    c = s.campaign
    if not c.awaiting:  # no plan waits (an answer that came twice): it changes nothing
        return []
    word = rec["answer"].strip().strip(".!`'\"").lower()
    entry = {"round": c.plan_round, "answer": rec["answer"], "source": rec["source"]}
    where = {"round": c.plan_round, "source": rec["source"]}
    if word in APPROVE:
        c.approvals.append({**entry, "verdict": "approved"})
        c.awaiting, s.final = False, None
        if not s.isolated:  # one at a time: the plan's first task works now
            s.tasks[c.plan_first].status = TaskStatus.ACTIVE
        return [Effect.event("campaign_plan_approved", "MPE-PLAN-APPROVED", **where)]
    if word in CANCEL:
        c.approvals.append({**entry, "verdict": "cancelled"})
        c.awaiting = False
        for i in s.current_tasks():
            if s.tasks[i].status is TaskStatus.PENDING:
                s.tasks[i].status, s.tasks[i].note = TaskStatus.SKIPPED, "the plan was cancelled"
        s.final = cert.Certificate(
            cert.BACKPRESSURE,
            "plan_cancelled",
            f"A person cancelled the plan (round {c.plan_round}, via {rec['source']}) before any of its tasks started.",
            residual_history=list(s.history),
        )
        return [Effect.event("campaign_plan_cancelled", "MPE-PLAN-CANCELLED", **where)]
    if not s.can_replan():
        c.approvals.append({**entry, "verdict": "kept"})
        assert s.final is not None
        note = f"The last answer ({rec['answer'][:200]!r}) could not be taken: no re-plan is left."
        s.final.detail = describe(s, note)
        return [Effect.event("campaign_plan_kept", "MPE-PLAN-KEPT", **where, reason="no re-plan left")]
    c.approvals.append({**entry, "verdict": "re-plan"})
    c.awaiting, s.final = False, None
    said = f"A person reviewed the plan and asked for changes (answer via {rec['source']}): {rec['answer']}"
    return campaign.request_replan(s, "review", None, "plan_review", said)
