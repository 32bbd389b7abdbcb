"""Pause points (issue #34), part of `LoopState`: a micro-task marked `(pause)` (a list
item's first line) or `"pause": true` (a planned task) stops the run before it starts, for
a person to look at the work so far. The run ends BLOCKED (`pause_point`), answerable like
a task that asked (inbox/answer.py): the result says what is done and what comes next, and
an answer resumes the same run on its branch, the task then starting with the answer in
its prompt. Decided from the state alone (a marked task with no iteration and no answer
yet), so a replay after a crash decides the same."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert


class PauseState:
    """Part of `LoopState` (loopstate.py): uses its plan, tasks and `end`."""

    def pause_due(self, j: int) -> bool:
        """Task `j` is marked to pause before it and nobody answered that pause yet."""
        t = self.tasks[j]
        return self.plan.tasks[j].pause and t.iterations == 0 and t.starts == 0 and not t.answers

    def pause_ready(self) -> int | None:
        """A parallel run with nothing live: the first pending task that waits only for its
        pause (everything it needs passed), or None."""
        for j, t in enumerate(self.tasks):
            if t.status == "pending" and self.pause_due(j):
                if all(self.tasks[n].status == "completed" for n in self.plan.needs(j)):
                    return j
        return None

    def pause_before(self, j: int) -> cert.Certificate:
        """End the run before task `j`, saying what is done and what comes next."""
        self.mt_index = j
        done = [f"{t.mt_id} ({t.title.rstrip('.')})" for t in self.tasks if t.status == "completed"]
        task = self.plan.tasks[j]
        return self.end(
            cert.BLOCKED,
            "pause_point",
            f"Paused before {task.mt_id}, as the MP marks it with (pause). Done: {', '.join(done) or 'nothing yet'}. "
            f"Next: {task.mt_id}: {task.title.rstrip('.')}.",
        )
