"""The reviewer's verdict (issue #42): with `[agent.reviewer]`, work whose every check
passed is reviewed before it lands (`REVIEW-<n>`, kind `review`; run/review.py asks). The
reviewer can only add failures, never remove one, and lands nothing itself:

- `approve`: the run ends as the checks say (EXACT);
- changes, with `[agent] review_rounds` left: each task an item names goes back to work,
  the items in its next prompt as a failing `review` check, held to every check of the
  MP; when every task passed again, the reviewer reviews again;
- changes with no round left, or no verdict (no answer under the nonce, no sandbox to run
  it read-only): the run ends BLOCKED, the verified work not landed.

Replayed from the ledger like every record."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state import ending
from mp_engine.agent.state.kinds import Effect, EffectKind, TaskStatus
from mp_engine.agent.state.model import Cursor, RunState

APPROVE, CHANGES = "approve", "changes"


def item_text(item: dict[str, str]) -> str:
    """`out/b.txt (MT-002): say goodbye`, or `MT-002: ...` when the item names the task."""
    where = item["mt"] if item["target"] == item["mt"] else f"{item['target']} ({item['mt']})"
    return f"{where}: {item['change']}"


def items_text(items: list[dict[str, str]]) -> str:
    return "; ".join(item_text(i) for i in items)


def reduce_review(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """`rec`: {"round", "verdict" (approve, changes, or why there is none), "items": [{"target",
    "mt", "change"}], "error", "evidence", "usage", "level_name"}."""
    c = s.campaign
    s.applied += 1
    s.usage.add(rec, task="review", level=rec.get("level_name", "reviewer"))
    c.pending = None
    verdict, items = rec["verdict"], rec.get("items") or []
    c.reviews.append(
        {
            "round": rec["round"],
            "verdict": verdict,
            "items": items,
            "error": rec.get("error", ""),
            "evidence": rec.get("evidence"),
            "level": rec.get("level_name"),
        }
    )
    effects = [Effect.event("review_verdict", "MPE-REVIEW", round=rec["round"], verdict=verdict, items=len(items))]
    if verdict == APPROVE:
        c.review_approved = True
        ending.finish(s)
        return effects
    if verdict != CHANGES:
        s.final = cert.Certificate(
            cert.BLOCKED,
            "review_failed",
            f"The reviewer ({rec.get('level_name')}) gave no verdict: {rec.get('error')}. The checks passed, but the "
            "work does not land without a review.",
            residual_history=list(s.history),
        )
        return effects
    if c.review_rounds >= s.cfg.review_rounds:
        s.final = cert.Certificate(
            cert.BLOCKED,
            "review_changes",
            f"The reviewer still requests changes after {c.review_rounds} round(s) of changes (`[agent] "
            f"review_rounds = {s.cfg.review_rounds}`): {items_text(items)}. The checks passed, but the work did not land.",
            residual_history=list(s.history),
        )
        return effects
    c.review_rounds += 1
    return effects + _send_back(s, items)


def _send_back(s: RunState, items: list[dict[str, str]]) -> list[Effect]:
    """Each task an item names works again, the items in its next prompt (`TaskState.review`)."""
    c = s.campaign
    named = [i for i, t in enumerate(s.tasks) if any(it["mt"] == t.mt_id for it in items)]
    if not named:  # the run names a task for every item (run/review.py); the last one, else
        named = [s.current_tasks()[-1]]
        items = [{**it, "mt": s.tasks[named[0]].mt_id} for it in items]
    effects: list[Effect] = []
    c.final_verified = False  # a planned MP's final drift check runs again, then the review
    moved = s.cur.moved_to()  # one at a time: the run's worktree, where the last task left it
    for i in named:
        t = s.tasks[i]
        t.review = [it for it in items if it["mt"] == t.mt_id]
        t.note, t.final_level, t.ended_at = f"the reviewer requested changes (round {c.review_rounds})", None, None
        t.status = TaskStatus.PENDING
        effects.append(
            Effect.event(
                "micro_task_review_changes", "MPE-MT-REVIEW", mt=t.mt_id, round=c.review_rounds, items=len(t.review)
            )
        )
        if s.isolated:  # its worktree starts over from the tip of mp/<MP-id>, which holds every task's work
            t.status, t.refresh_due = TaskStatus.ACTIVE, True
            s.cursors[i] = Cursor()  # its start (a refresh) sets what its worktree holds
            effects.append(Effect.on_task(EffectKind.REFRESH, i))
    s.focus = named[0]
    if not s.isolated:
        moved.level = 0
        s.cursors[named[0]] = moved
        s.tasks[named[0]].status = TaskStatus.ACTIVE
    return effects
