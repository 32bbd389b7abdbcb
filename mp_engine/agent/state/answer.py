"""A person's word on a run that ended waiting for it (issue #32; inbox/answer.py): the task
goes on, with the question and the answer in its next prompt; the tasks skipped because
they needed it wait for it again; the run's ending is undone. Replayed from the ledger
(`ANSWER-<n>` steps, kind `answer`) like every other record."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.state.approval import PLAN_MT, reduce_plan_answer
from mp_engine.agent.state.kinds import Effect, TaskStatus
from mp_engine.agent.state.model import RunState


def reduce_answer(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """`rec`: the answer step's record (`mt`, `question`, `answer`, `source`, `seq`); an
    answer to a plan that waits for approval (`mt` = PLAN) is state/approval.py's."""
    if rec["mt"] == PLAN_MT:
        return reduce_plan_answer(s, rec)
    s.applied += 1
    i = next(k for k, t in enumerate(s.tasks) if t.mt_id == rec["mt"])
    task = s.tasks[i]
    task.answers.append({"question": rec["question"], "answer": rec["answer"]})
    s.failures = [f for f in s.failures if f.mt != task.mt_id]
    s.final = None
    task.status = TaskStatus.PENDING if s.isolated else TaskStatus.ACTIVE
    task.note, task.ended_at = None, None
    for j, other in enumerate(s.tasks):  # what was skipped for want of it waits for it again
        if other.status is TaskStatus.SKIPPED and not (s.plan.needs(j) & s.dead):
            other.status, other.note = TaskStatus.PENDING, None
    if not s.isolated:  # the task works on where the run stopped, in the run's worktree
        s.cursors[i] = s.cur.moved_to()
    s.focus = i
    cur = s.cur
    if s.levels[cur.level].hard_gate:  # back to the last level that calls an agent
        cur.level = max(0, cur.level - 1)
    cur.restart()
    return [Effect.event("micro_task_answered", "MPE-MT-ANSWERED", mt=task.mt_id, source=rec["source"])]
