"""A review round on the pull request a run opened (issue #41): comments from people who
may steer, taken by the engine after the run ended (pipeline/reviewing.py) and recorded in
the run (`PR-REVIEW-<n>`, kind `pr_review`), replayed like every other record. The same run goes
on with a task that quotes them, on the same branch; the engine pushes again and CI judges
that push (a new CI cycle)."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.state.followup import follow_up, quoted
from mp_engine.agent.state.kinds import Effect
from mp_engine.agent.state.model import RunState

ASKED = (
    "People who may steer this work commented on its pull request ({url}). Do what they ask, within the "
    "MP's goal, and keep every check passing. A comment that asks a question only a person can answer: ask "
    "it back (say you are blocked, with the question), do not guess. Their comments, oldest first:\n\n"
)


def reduce_pr_review(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """`rec`: {"round", "keys", "authors", "text": the comments as the prompt quotes them,
    "url": the pull request, "seq"}."""
    s.applied += 1
    who = ", ".join(rec.get("authors", [])) or "a reviewer"
    task = follow_up(
        s,
        f"review-{rec['round']}",
        f"Answer the review on the pull request (review round {rec['round']}): {who}",
        ASKED.format(url=rec.get("url") or "the pull request") + quoted(rec.get("text") or "(no text)"),
    )
    return [
        Effect.event(
            "micro_task_review", "MPE-MT-REVIEW", mt=task.mt_id, round=rec["round"], comments=len(rec.get("keys", []))
        )
    ]
