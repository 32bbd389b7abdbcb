"""The loop's decisions about parallel tasks (issue #29), part of `LoopState`.

A parallel run records three more kinds of step, each replayed like an iteration:
`MT-002_start-1` (kind `start`: the scheduler started the task in a fresh worktree from
the tip of `mp/<MP-id>`), the task's iterations as usual, and `INT-<n>` (kind
`integrate`: the integrator tried to bring an accepted task onto `mp/<MP-id>`). Every
record of a parallel run carries `seq`, the order the run applied it in, and replay
applies them in that order, so the state after a crash is the state before it.

What they decide:
- Which task starts next (`startable`): a pending task whose needs all passed (are
  integrated), in plan order, whose planned files overlap no running task's; a task
  that failed integration `max_integration_retries` times runs only alone.
- A task whose dual gate passed in its worktree is `accepted`; its integration makes it
  `completed` or sends it back (a conflict, or a check that broke on the combined work)
  as a failed iteration, in a worktree refreshed from the new tip.
- The MP ends when no task is pending, running or waiting for integration.
"""

from __future__ import annotations

from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state.model import Cursor, Effect

# Ends that are the run's, not one task's: every running task stops with them.
GLOBAL_ENDS = ("stop_file", "wall_budget", "max_iterations", "cost_budget")
LIVE = ("active", "accepted")  # started and not yet ended


class ParallelState:
    """Part of `LoopState` (loopstate.py): uses its cfg, plan, tasks, cursors, history,
    final, failures and the methods that fail a task or finish the run."""

    # -- views -----------------------------------------------------------------------

    def live(self) -> list[int]:
        """The tasks started and not yet ended (running, or waiting for integration)."""
        return [i for i, t in enumerate(self.tasks) if t.status in LIVE]

    def startable(self, busy: set[int]) -> list[int]:
        """The pending tasks that may start now, in plan order: every task each needs has
        passed; its planned files overlap none of `busy` (the live tasks) nor of one
        started before it in this list; a solo task only when nothing else is live, and
        then alone. Nothing starts while a planning round or a drift check is pending."""
        if self.final is not None or self.pending is not None:
            return []
        if any(self.tasks[i].solo for i in busy):
            return []
        out: list[int] = []
        taken = set(busy)
        for j, t in enumerate(self.tasks):
            if t.status != "pending" or self.pause_due(j):  # a pause point starts only once answered
                continue
            needs = self.plan.needs(j)
            if any(self.tasks[n].status != "completed" for n in needs):
                continue
            if t.solo and (taken or out):
                continue
            files = set(self.plan.tasks[j].files)
            if files and any(files & set(self.plan.tasks[k].files) for k in taken):
                continue
            out.append(j)
            taken.add(j)
            if t.solo:
                break
        return out

    # -- records -----------------------------------------------------------------------

    def apply_start(self, rec: dict[str, Any]) -> list[Effect]:
        """The scheduler started task `rec["mt_index"]` in a fresh worktree (`digest`: its
        fingerprint there) at `at`; a restart after a refresh (`restart`) keeps its level."""
        i = rec["mt_index"]
        task = self.tasks[i]
        self.applied += 1
        cursor = self.cursors[i] if rec.get("restart") and i in self.cursors else Cursor()
        self.cursors[i] = cursor  # a restart (a refreshed worktree) keeps the task's level
        cursor.last_digest, cursor.prev_passed = rec["digest"], set()
        task.status = "active"
        task.starts += 1
        task.base = rec["base"]
        task.refresh_due = False
        task.started_at = task.started_at or rec["at"]
        if rec.get("restart"):
            return []
        return [Effect("event", "micro_task_started", "MPE-MT-START", {"mt": task.mt_id, "worktree": rec["worktree"]})]

    def apply_integration(self, rec: dict[str, Any]) -> list[Effect]:
        """The integrator's verdict on accepted task `rec["mt_index"]`."""
        i = rec["mt_index"]
        self.mt_index = i
        task = self.tasks[i]
        self.applied += 1
        self.integrations += 1
        where = {"mt": task.mt_id, "attempt": rec["attempt"]}
        if rec["outcome"] == "integrated":
            task.status, task.final_level, task.ended_at = "completed", self.cur.level, rec["at"]
            effects = [
                Effect("event", "micro_task_integrated", "MPE-MT-INTEGRATED", {**where, "commit": rec["commit"]}),
                Effect("event", "micro_task_complete", "FR-EVT-MT-004", {"mt": task.mt_id, "commit": rec["commit"]}),
            ]
            if self.cur.level > 0:
                effects.append(Effect("distill", fields={"mt_index": i}))
            self.drift_due()
            return effects + self.settle()
        task.integration_failures += 1
        task.records.append(rec)  # the next prompt shows the conflict or the failing checks
        self.history.append({"mt": task.mt_id, "iteration": task.iterations, "level": self.cur.level,
                             "residual": rec["residual"]})  # fmt: skip
        effects = [
            Effect(
                "event",
                "micro_task_conflict",
                "MPE-MT-CONFLICT",
                {**where, "outcome": rec["outcome"], "detail": rec["detail"], "failing": rec["failing"]},
            )
        ]
        if task.solo:  # alone, and still it does not integrate: the task fails
            detail = f"{task.mt_id} did not integrate even alone: {rec['detail']}"
            return effects + self._fail_task(cert.DIVERGED, "integration", detail)
        task.status, task.refresh_due = "active", True
        self.cur.restart()
        if task.integration_failures > self.cfg.max_integration_retries:
            task.solo = True
        return effects + [Effect("refresh", fields={"mt_index": i})]

    # -- the end -----------------------------------------------------------------------

    def settle(self) -> list[Effect]:
        """After a task ended: a pending task nothing could verify any more is skipped;
        with no task pending, running or waiting for integration, the MP ends."""
        effects: list[Effect] = []
        for j, t in enumerate(self.tasks):
            if t.status == "pending" and self.verified and not self.checks_of(j):
                self._skip(j, "every check that accepts it belongs to a micro-task that did not pass", effects)
        if self.final is None and self.pending is None and not self.live() and (j := self.pause_ready()) is not None:
            self.pause_before(j)  # nothing else can go on before it: the run pauses there
        if self.final is None and self.pending is None and not any(t.status in ("pending", *LIVE) for t in self.tasks):
            self.mt_index = len(self.tasks)  # no task in focus: the run's certificate
            self._finish()
        return effects

    def end_all(self, type_: str, reason: str, detail: str) -> cert.Certificate:
        """A run-wide end (the budget, the iteration cap, SYSTEM/STOP): every live task
        stops where it is."""
        self.stop_live(reason)
        self.final = cert.Certificate(
            type=type_, reason=reason, detail=detail, mt=None, residual_history=list(self.history)
        )
        return self.final

    def stop_live(self, why: str) -> None:
        """The run ends while tasks are live: each stops where it is (failed, saying why)."""
        for t in self.tasks:
            if t.status in LIVE:
                t.status, t.note = "failed", f"stopped: {why}"

    def overlaps(self) -> None:
        """Each task's `overlapped_with`: the tasks that ran at the same time."""
        spans = [(t, t.started_at, t.ended_at or "9999") for t in self.tasks if t.started_at]
        for t, start, end in spans:
            t.overlapped_with = [o.mt_id for o, s, e in spans if o is not t and s < end and start < e]
