"""How tasks and the run end: a task that did not pass (its dependents skipped, the next
one in focus), a run-wide end (the budget, the iteration cap, SYSTEM/STOP), and the run's
own end, whose certificate is the first failure's, or EXACT when every task passed."""

from __future__ import annotations

from dataclasses import replace

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state import campaign
from mp_engine.agent.state.kinds import LIVE, Effect, TaskStatus
from mp_engine.agent.state.model import RunState

# Ends that are the run's, not one task's: every task in a worktree of its own stops with them.
GLOBAL_ENDS = ("stop_file", "wall_budget", "max_iterations", "cost_budget", "disk_usage")


def end(s: RunState, type_: str, reason: str, detail: str) -> cert.Certificate:
    """End the run on the task in focus (or, for a run-wide end with tasks at once, on
    none: every live task stops where it is)."""
    if s.isolated and reason in GLOBAL_ENDS:
        stop_live(s, reason)
        s.final = cert.Certificate(type=type_, reason=reason, detail=detail, mt=None, residual_history=list(s.history))
        return s.final
    task = s.task
    if task is not None and type_ != cert.EXACT:
        task.status = TaskStatus.BLOCKED if type_ == cert.BLOCKED else TaskStatus.FAILED
    s.final = cert.Certificate(
        type=type_,
        reason=reason,
        detail=detail,
        mt=task.mt_id if task else None,
        residual=0 if type_ == cert.EXACT else s.residual,
        best=None if type_ == cert.EXACT else s.best(),
        residual_history=list(s.history),
        metrics=s.metric_bests(),
        environment=(s.last_record or {}).get("environment") if type_ != cert.EXACT else None,
    )
    return s.final


def stop_live(s: RunState, why: str) -> None:
    """The run ends while tasks are live: each stops where it is (failed, saying why)."""
    for t in s.tasks:
        if t.status in LIVE:
            t.status, t.note = TaskStatus.FAILED, f"stopped: {why}"


def fail_task(s: RunState, type_: str, reason: str, detail: str) -> list[Effect]:
    """The task in focus did not pass (its chain gave up, or the agent is blocked): the
    tasks that need it are SKIPPED, and the run goes on with the next runnable one. The
    first failure's certificate is the run's, when no task is left. In a planned MP, a task
    whose chain gave up asks for a re-plan instead, while re-plans are left."""
    if campaign.exhausted(type_, reason) and s.can_replan():
        task = s.task
        assert task is not None
        task.status, task.note = TaskStatus.FAILED, f"its chain gave up ({reason}); re-planned"
        return campaign.request_replan(s, "failed", task.mt_id, reason, detail)
    s.failures.append(end(s, type_, reason, detail))
    s.final = None
    effects: list[Effect] = []
    first = 0 if s.isolated else s.focus + 1
    for j in range(first, len(s.tasks)):  # all of them now: the result lists them
        skip_if_needs_failed(s, j, effects)
    return effects + advance(s)


def skip(s: RunState, j: int, why: str, effects: list[Effect]) -> None:
    s.tasks[j].status, s.tasks[j].note = TaskStatus.SKIPPED, why
    effects.append(Effect.event("micro_task_skipped", "FR-EVT-MT-016", mt=s.tasks[j].mt_id, why=why))


def skip_if_needs_failed(s: RunState, j: int, effects: list[Effect]) -> bool:
    """Skip pending task `j` when it needs one that did not pass (a task skipped just now
    counts too); True when it did."""
    gone = s.plan.needs(j) & s.dead
    if s.tasks[j].status is not TaskStatus.PENDING or not gone:
        return False
    skip(s, j, f"it needs {', '.join(s.tasks[d].mt_id for d in sorted(gone))}, which did not pass", effects)
    return True


def advance(s: RunState) -> list[Effect]:
    """Go on with the first pending task after the one in focus whose needs passed (a
    pending task whose every check belongs to a task that did not pass is skipped: nothing
    could verify it); with none left, the run ends. Tasks in worktrees of their own are
    started by the scheduler: the run ends when none is pending, running or being
    integrated."""
    if s.isolated:
        return settle(s)
    effects: list[Effect] = []
    j = s.focus + 1
    while j < len(s.tasks):
        if s.tasks[j].status is TaskStatus.PENDING and not skip_if_needs_failed(s, j, effects):
            if s.verified and not s.plan.accepting(j, s.dead):
                skip(s, j, "every check that accepts it belongs to a micro-task that did not pass", effects)
            else:
                break
        j += 1
    moved = s.cur.moved_to()  # the next task works in the same worktree
    s.focus = j
    s.cursors[j] = moved
    if s.task is None:
        finish(s)
        return effects
    s.task.status = TaskStatus.ACTIVE
    if moved.level > 0:
        s.drop_backs += 1
        effects.append(
            Effect.event(
                "micro_task_drop_back", "FR-EVT-MT-014", mt=s.task.mt_id, iteration=1, level=0, from_level=moved.level
            )
        )
        moved.level = 0
    return effects


def settle(s: RunState) -> list[Effect]:
    """Tasks at once, after a task ended: a pending task nothing could verify any more is
    skipped; with no task pending, running or waiting for integration, the run ends."""
    effects: list[Effect] = []
    for j, t in enumerate(s.tasks):
        if t.status is TaskStatus.PENDING and s.verified and not s.checks_of(j):
            skip(s, j, "every check that accepts it belongs to a micro-task that did not pass", effects)
    quiet = s.final is None and s.campaign.pending is None
    if quiet and not s.live() and (ready := pause_ready(s)) is not None:
        pause_before(s, ready)  # nothing else can go on before it: the run pauses there
    if quiet and s.final is None and not any(t.status in (TaskStatus.PENDING, *LIVE) for t in s.tasks):
        s.focus = len(s.tasks)  # no task in focus: the run's certificate
        finish(s)
    return effects


def finish(s: RunState) -> None:
    """Every task ended: the run's certificate (a planned MP's final drift check first, then
    the reviewer's review)."""
    if not s.failures and (campaign.verify_at_end(s) or campaign.review_due(s)):
        return
    if s.failures:
        s.final = replace(s.failures[0], residual_history=list(s.history))
    elif not s.verified:  # `require_checks = false` and no check: the word alone
        end(
            s,
            cert.UNVERIFIED,
            "claims_only",
            f"All {len(s.tasks)} micro-task(s) were claimed done, but the MP has no check: "
            "nothing verified the work (`[agent] require_checks = false`).",
        )
    else:
        end(s, cert.EXACT, "all_checks_passed", f"All {len(s.tasks)} micro-task(s) passed the dual gate.")


def pause_ready(s: RunState) -> int | None:
    """Tasks at once, nothing live: the first pending task that waits only for its pause
    (everything it needs passed), or None."""
    for j, t in enumerate(s.tasks):
        if t.status is TaskStatus.PENDING and s.pause_due(j):
            if all(s.tasks[n].status is TaskStatus.COMPLETED for n in s.plan.needs(j)):
                return j
    return None


def pause_before(s: RunState, j: int) -> cert.Certificate:
    """End the run before task `j` (marked `(pause)`), saying what is done and what comes
    next; a person's answer resumes it (issue #34)."""
    s.focus = j
    done = [f"{t.mt_id} ({t.title.rstrip('.')})" for t in s.tasks if t.status is TaskStatus.COMPLETED]
    task = s.plan.tasks[j]
    return end(
        s,
        cert.BLOCKED,
        "pause_point",
        f"Paused before {task.mt_id}, as the MP marks it with (pause). Done: {', '.join(done) or 'nothing yet'}. "
        f"Next: {task.mt_id}: {task.title.rstrip('.')}.",
    )


def overlaps(s: RunState) -> None:
    """Each task's `overlapped_with`: the tasks that ran at the same time."""
    spans = [(t, t.started_at, t.ended_at or "9999") for t in s.tasks if t.started_at]
    for t, start, stop in spans:
        t.overlapped_with = [o.mt_id for o, a, b in spans if o is not t and a < stop and start < b]
