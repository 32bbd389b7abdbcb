"""What the result and `status` show of the gates a person and a second model hold (issue
#42): the plan that waits for approval (its tasks, for the dashboard's graph and MCP), the
answers it got, and what the reviewer said in each round."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.state.approval import PLAN_MT
from mp_engine.agent.state.model import RunState
from mp_engine.agent.state.review import item_text
from mp_engine.inbox.mpfile import MicroProject


def plan_tasks(state: RunState, mp: MicroProject) -> list[dict[str, Any]]:
    """The tasks of the plan that waits, as the dashboard draws them."""
    first = state.campaign.plan_first
    out = []
    for i in range(first, len(state.tasks)):
        task, planned = state.tasks[i], state.plan.tasks[i]
        out.append(
            {
                "mt_id": task.mt_id,
                "title": task.title,
                "status": task.status.value,
                "after": [state.tasks[n].mt_id for n in sorted(state.plan.needs(i))],
                "checks": [mp.checks[k].step_id for k in planned.checks or ()],
                "files": list(planned.files),
                "ref": planned.ref,
            }
        )
    return out


def answerable(state: RunState, mp: MicroProject) -> dict[str, Any] | None:
    """A plan waiting for approval, as the result asks a person (inbox/answer.py)."""
    c = state.final
    if c is None or c.reason != "plan_review" or not state.campaign.awaiting:
        return None
    return {"mt": PLAN_MT, "kind": "plan_review", "question": c.detail, "plan": plan_tasks(state, mp)}


def progress(state: RunState, mp: MicroProject) -> dict[str, Any]:
    """The gates' part of the progress snapshot's `campaign`."""
    c = state.campaign
    out: dict[str, Any] = {}
    if c.awaiting:
        out["awaiting_approval"] = plan_tasks(state, mp)
    if c.approvals:
        out["approvals"] = c.approvals
    if c.reviews:
        out["reviews"] = c.reviews
    return out


def result(state: RunState) -> dict[str, Any]:
    """The result's `review` (RESULT_last.json) and the agent's `approvals`."""
    c = state.campaign
    out: dict[str, Any] = {}
    reviewer = state.cfg.reviewer
    if reviewer is not None or c.reviews:
        out["review"] = {
            "reviewer": reviewer.name if reviewer else None,
            "rounds": c.review_rounds,
            "max_rounds": state.cfg.review_rounds,
            "approved": c.review_approved,
            "reviews": c.reviews,
        }
    if c.approvals:
        out["approvals"] = c.approvals
    return out


def sections(state: RunState, run_rel: str) -> list[dict[str, str]]:
    """The result's sections: the answers to the plan, and the review."""
    c = state.campaign
    out = []
    if c.approvals:
        lines = [
            f"- Plan round {a['round']}: `{a['answer'][:200]}` (via {a['source']}): {a['verdict']}" for a in c.approvals
        ]
        out.append({"title": "Plan approval", "body": "\n".join(lines)})
    if c.reviews:
        lines = [f"- Reviewer: `[agent.reviewer]` {state.cfg.reviewer.name if state.cfg.reviewer else '-'}, read-only"]
        for r in c.reviews:
            said = (
                "approved"
                if r["verdict"] == "approve"
                else ("requested changes" if r["verdict"] == "changes" else f"no verdict ({r['error']})")
            )
            lines.append(
                f"- Round {r['round']}: {said}" + (f" — `{run_rel}/{r['evidence']}/`" if r.get("evidence") else "")
            )
            lines += [f"  - {item_text(i)}" for i in r["items"]]
        out.append({"title": "Review", "body": "\n".join(lines)})
    return out
