"""Tasks in worktrees of their own (issue #29): two more kinds of record, each replayed like
an iteration. `MT-002_start-1` (kind `start`): the scheduler started the task in a fresh
worktree from the tip of `mp/<MP-id>`; `INT-<n>` (kind `integrate`): the integrator tried
to bring an accepted task onto `mp/<MP-id>`. Every record of such a run carries `seq`, the
order the run applied it in, and replay applies them in that order.

A task whose dual gate passed in its worktree is `accepted`; its integration makes it
`completed` or sends it back (a conflict, or a check that broke on the combined work) as a
failed iteration, in a worktree refreshed from the new tip; a task that failed integration
`max_integration_retries` times runs only alone. Which task may start is
`RunState.startable`; the run ends when no task is pending, running or being integrated.
"""

from __future__ import annotations

from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state import campaign, ending
from mp_engine.agent.state.kinds import Effect, EffectKind, TaskStatus
from mp_engine.agent.state.model import Cursor, RunState


def reduce_start(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """Task `rec["mt_index"]` started in a fresh worktree (`digest`: its fingerprint there)
    at `at`; a restart after a refresh (`restart`) keeps its level."""
    i = rec["mt_index"]
    task = s.tasks[i]
    s.applied += 1
    cursor = s.cursors[i] if rec.get("restart") and i in s.cursors else Cursor()
    s.cursors[i] = cursor
    cursor.last_digest, cursor.prev_passed = rec["digest"], set()
    task.status = TaskStatus.ACTIVE
    task.starts += 1
    task.base = rec["base"]
    task.refresh_due = False
    task.started_at = task.started_at or rec["at"]
    if rec.get("restart"):
        return []
    return [Effect.event("micro_task_started", "MPE-MT-START", mt=task.mt_id, worktree=rec["worktree"])]


def reduce_integration(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """The integrator's verdict on accepted task `rec["mt_index"]`."""
    i = rec["mt_index"]
    s.focus = i
    task, cur = s.tasks[i], s.cur
    s.applied += 1
    s.integrations += 1
    where = {"mt": task.mt_id, "attempt": rec["attempt"]}
    if rec["outcome"] == "integrated":
        task.status, task.final_level, task.ended_at = TaskStatus.COMPLETED, cur.level, rec["at"]
        effects = [
            Effect.event("micro_task_integrated", "MPE-MT-INTEGRATED", **where, commit=rec["commit"]),
            Effect.event("micro_task_complete", "FR-EVT-MT-004", mt=task.mt_id, commit=rec["commit"]),
        ]
        if cur.level > 0:
            effects.append(Effect.on_task(EffectKind.DISTILL, i))
        campaign.drift_due(s)
        return effects + ending.settle(s)
    task.integration_failures += 1
    task.records.append(rec)  # the next prompt shows the conflict or the failing checks
    s.history.append({"mt": task.mt_id, "iteration": task.iterations, "level": cur.level, "residual": rec["residual"]})
    conflict = Effect.event(
        "micro_task_conflict",
        "MPE-MT-CONFLICT",
        **where,
        outcome=rec["outcome"],
        detail=rec["detail"],
        failing=rec["failing"],
    )
    if task.solo:  # alone, and still it does not integrate: the task fails
        detail = f"{task.mt_id} did not integrate even alone: {rec['detail']}"
        return [conflict, *ending.fail_task(s, cert.DIVERGED, "integration", detail)]
    task.status, task.refresh_due = TaskStatus.ACTIVE, True
    cur.restart()
    if task.integration_failures > s.cfg.max_integration_retries:
        task.solo = True
    return [conflict, Effect.on_task(EffectKind.REFRESH, i)]
