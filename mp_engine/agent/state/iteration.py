"""The decision on one finished iteration (its record): the task passed the dual gate
(done, or accepted for integration), the agent is blocked, a breaker opened or the
residual diverged (escalate, or fail the task at its last level), `fail_threshold`
failures at a level (escalate; the hard gate ends the task BLOCKED), or go on."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state import campaign, ending
from mp_engine.agent.state.kinds import Effect, EffectKind, TaskStatus
from mp_engine.agent.state.model import RunState


def reduce_iteration(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """Account one finished iteration; return what the run must do about it."""
    s.usage.add(rec, task=rec["mt"], level=rec.get("level_name") or str(rec["level"]))
    effects = _decide(s, rec)
    if s.final is None and (ceiling := s.cfg.max_cost_usd) is not None and s.usage.cost >= ceiling:
        ending.end(
            s,
            cert.TIMEOUT,
            "cost_budget",
            f"The agent calls cost ${s.usage.cost:.4f}, the MP's budget (`[agent] max_cost_usd`) "
            f"is ${ceiling:g}, before every micro-task passed.",
        )
    task = s.tasks[rec["mt_index"]] if s.isolated else None
    if task is not None and task.status in (TaskStatus.FAILED, TaskStatus.BLOCKED) and task.ended_at is None:
        task.ended_at = rec.get("at")
    return effects


def where(rec: dict[str, Any]) -> dict[str, Any]:
    return {"mt": rec["mt"], "iteration": rec["iteration"], "level": rec["level"]}


def _account(s: RunState, rec: dict[str, Any]) -> bool:
    """Count the iteration on its task and cursor; True when it made progress."""
    task = s.task
    assert task is not None and s.final is None
    s.last_record = rec
    s.applied += 1
    s.total += 1
    task.iterations += 1
    if rec["level"] not in task.levels:
        task.levels.append(rec["level"])
    task.records.append(rec)
    s.history.append({**where(rec), "residual": rec["residual"]})
    cur = s.cur
    newly_passing = set(rec["passed"]) - cur.prev_passed
    progress = rec["digest"] != cur.last_digest or bool(newly_passing)
    if any(not m["met"] for m in rec.get("metrics", [])) and cur.trend:
        # A metric goal: progress is the distance shrinking (a residual below the best so
        # far at this level) or a check newly passing; a diff that moves nothing is not.
        progress = bool(newly_passing) or rec["residual"] < min(cur.trend)
    if rec.get("protected"):
        # It changed a file that judges the work (issue #42): that edit, restored, is no progress.
        progress = bool(newly_passing)
    cur.last_digest, cur.prev_passed = rec["digest"], set(rec["passed"])
    cur.done_streak = cur.done_streak + 1 if rec.get("claimed", rec["gate"]) else 0
    s.last_summary = rec.get("summary") or s.last_summary
    return progress


def _decide(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    if s.isolated:
        s.focus = rec["mt_index"]
    progress = _account(s, rec)
    task, cur = s.task, s.cur
    assert task is not None
    at = {**where(rec), "progress": progress}
    if rec["gate"] and cur.done_streak < s.cfg.done_signals:
        # Checks pass and the agent says done, but `done_signals` asks it to say so again.
        signals = Effect.event("micro_task_done_signal", "", **at, signals=cur.done_streak, needed=s.cfg.done_signals)
        out_of_iterations(s, rec)
        return [signals]
    if rec["gate"] and s.isolated:  # accepted in its worktree: the integrator decides
        task.status = TaskStatus.ACCEPTED
        return [Effect.on_task(EffectKind.INTEGRATE, s.focus)]
    if rec["gate"]:
        task.status, task.final_level = TaskStatus.COMPLETED, rec["level"]
        effects = [
            Effect.event("micro_task_complete", "FR-EVT-MT-004", **at),
            Effect.on_task(EffectKind.COMMIT, s.focus),
        ]
        if rec["level"] > 0:
            effects.append(Effect.on_task(EffectKind.DISTILL, s.focus))
        effects += ending.advance(s)
        campaign.drift_due(s)
        return effects
    if rec["blocked"]:
        blocked = Effect.event("micro_task_blocked", "FR-EVT-MT-017", **at, reason=rec["blocked_reason"])
        why = f"The agent reported being blocked on {rec['mt']}: {rec['blocked_reason']}"
        return [blocked, *ending.fail_task(s, cert.BLOCKED, "agent_blocked", why)]
    return _failed(s, rec, progress)


def _failed(s: RunState, rec: dict[str, Any], progress: bool) -> list[Effect]:
    """A failed iteration. An open breaker or a diverging residual escalates where it can
    (a stronger model is the first answer), and ends the task DIVERGED only at the last
    level. Otherwise `fail_threshold` failures at a level escalate."""
    cur = s.cur
    cur.fails_at_level += 1
    cur.trend.append(rec["residual"])
    cur.breakers.observe(progress=progress, error=rec["error"], status_ok=rec["status_ok"], work_type=rec["work_type"])
    trip = _trip(s, rec)
    can_escalate = cur.level + 1 < len(s.levels)
    if trip is not None:
        s.last_trip = {**where(rec), **trip, "escalated": can_escalate}
    if trip is not None and not can_escalate:
        return ending.fail_task(s, cert.DIVERGED, trip["reason"], trip["detail"])
    if trip is not None or (cur.fails_at_level >= s.cfg.fail_threshold and can_escalate):
        return _escalate(s, rec, trip["reason"] if trip else "fail_threshold")
    out_of_iterations(s, rec)
    return []


def _trip(s: RunState, rec: dict[str, Any]) -> dict[str, str] | None:
    """The breaker or divergence that fires on this failed iteration, or None. Divergence
    is Phuc's rule: the last `divergence_window` (3) residuals of the task at this level
    each higher than the one before."""
    w = s.cfg.divergence_window
    tail = s.cur.trend[-w:]
    if len(tail) == w and all(a < b for a, b in zip(tail, tail[1:], strict=False)):
        return {
            "reason": "residual_grew",
            "detail": f"The residual of {rec['mt']} grew {w - 1} times in a row: {' -> '.join(map(str, tail))}.",
        }
    tripped = s.cur.breakers.tripped(s.cfg)
    if tripped:
        name, what = tripped
        return {"reason": f"breaker:{name}", "detail": f"Circuit breaker {name} opened on {rec['mt']}: {what}."}
    return None


def _escalate(s: RunState, rec: dict[str, Any], cause: str) -> list[Effect]:
    """The task moves to the next level (a fresh start: counters and trend reset); a hard
    gate there ends the task BLOCKED."""
    cur = s.cur
    from_level = cur.level
    cur.level += 1
    s.escalations += 1
    cur.restart()
    effects = [
        Effect.event(
            "micro_task_escalated",
            "FR-EVT-MT-005",
            **where(rec),
            from_level=from_level,
            to_level=cur.level,
            to=s.levels[cur.level].name,
            cause=cause,
        )
    ]
    if s.levels[cur.level].hard_gate:
        why = (
            f"failed {s.cfg.fail_threshold} iterations"
            if cause == "fail_threshold"
            else f"escalated on {cause.replace('breaker:', 'circuit breaker ')}"
        )
        effects.append(Effect.event("micro_task_hard_gate", "FR-EVT-MT-006", **{**where(rec), "level": cur.level}))
        effects += ending.fail_task(
            s, cert.BLOCKED, "hard_gate", f"{rec['mt']} {why} at every level up to the hard gate."
        )
    return effects


def out_of_iterations(s: RunState, rec: dict[str, Any]) -> None:
    if s.total >= s.cfg.max_iterations:
        ending.end(
            s,
            cert.TIMEOUT,
            "max_iterations",
            f"All {s.cfg.max_iterations} iterations (`[agent] max_iterations`) were spent before {rec['mt']} passed.",
        )
