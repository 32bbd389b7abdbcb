"""A person's answer to a task that asked (issue #32; inbox/answer.py), part of
`LoopState`: the task goes on, with the question and the answer in its next prompt; the
tasks skipped because they needed it wait for it again; the MP's ending is undone.
Replayed from the ledger (`ANSWER-<n>` steps, kind `answer`) like every other record."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.state.model import Effect


class AnswerState:
    """Part of `LoopState` (loopstate.py): uses its tasks, plan, failures, final, the
    cursor of the task in focus and its chain."""

    def apply_answer(self, rec: dict[str, Any]) -> list[Effect]:
        """`rec`: the answer step's record (`mt`, `question`, `answer`, `source`, `seq`)."""
        self.applied += 1
        i = next(k for k, t in enumerate(self.tasks) if t.mt_id == rec["mt"])
        task = self.tasks[i]
        task.answers.append({"question": rec["question"], "answer": rec["answer"]})
        self.failures = [f for f in self.failures if f.mt != task.mt_id]
        self.final = None
        task.status, task.note, task.ended_at = ("pending" if self.parallel else "active"), None, None
        for j, other in enumerate(self.tasks):  # what was skipped for want of it waits for it again
            if other.status == "skipped" and not (self.plan.needs(j) & self.dead):
                other.status, other.note = "pending", None
        self.mt_index = i
        if self.levels[self.cur.level].hard_gate:  # back to the last level that calls an agent
            self.cur.level = max(0, self.cur.level - 1)
        self.cur.restart()
        return [Effect("event", "micro_task_answered", "MPE-MT-ANSWERED", {"mt": task.mt_id, "source": rec["source"]})]
