"""Driving a claimed run: its budget, its executor, and the outcome it records.

An executor returns completed, failed, interrupted (a stop signal: the run stays open
and resumes on the next start), waiting (an agent run waits out a usage limit) or
cancelled. A `CancelWatch` (inbox/cancel_request.py) looks for a cancel request while the
executor runs; a run it stopped ends CANCELLED, without a halt."""

from __future__ import annotations

import time
from typing import Any

import structlog

from mp_engine.config.load import Config
from mp_engine.core import disk
from mp_engine.core.clock import now_iso, parse_iso, seconds_until
from mp_engine.execute.base import ExecResult, Executor
from mp_engine.execute.steps import StepContext, TimeBudget
from mp_engine.inbox.cancel_request import CancelRequest, CancelWatch, consume, consumed
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.pipeline.context import Action, EngineContext, TickResult
from mp_engine.pipeline.finalize import finalize
from mp_engine.record import diagnosis as diag
from mp_engine.record.archive import RunArchive
from mp_engine.record.ledger import Ledger, read_artifact
from mp_engine.record.outcome import CANCELLED, COMPLETED, ERROR, Outcome

log = structlog.get_logger("mp_engine.pipeline.drive")
ENDED_AS = {"completed": COMPLETED, "cancelled": CANCELLED}  # an executor's end as the outcome's status


def budget(config: Config, mp: MicroProject, run: RunArchive, ledger: Ledger, executor: Executor) -> TimeBudget:
    """The MP's time budget (`Timeout:`, or the executor's default), less what its
    finished steps already used (a resumed run does not start from zero)."""
    used = sum((read_artifact(run.steps_dir, s) or {}).get("duration") or 0.0 for s in ledger.model.steps)
    return TimeBudget.of(mp, executor.time_budget(config), used)


def drive(ctx: EngineContext, run: RunArchive, ledger: Ledger, mp: MicroProject, executor: Executor) -> TickResult:
    config = executor.settings(ctx.config, mp)  # admission checked that they apply
    step_ctx = StepContext(
        ws=ctx.ws,
        config=config,
        run=run,
        ledger=ledger,
        mp=mp,
        events=ctx.events,
        stop=ctx.stop,
        stop_now=ctx.stop_now,
        budget=budget(config, mp, run, ledger, executor),
    )
    watch = CancelWatch(ctx.ws, mp.mp_id, ctx.stop_now, ctx.channel.peek_cancel, ctx.channel.peek_interval)
    step_ctx.cancelled = watch.cancelled
    try:
        with watch:
            res = executor.run(step_ctx)
    except Exception as e:  # a bug, or a full disk, must still end in a result, not a dead daemon
        if disk.is_full(e):
            freed = ctx.reserve.release() if ctx.reserve is not None else 0
            ctx.events.emit(
                "disk_full", mp=mp.mp_id, run=run.run_id, where=disk.describe(ctx.ws.root), reserve_freed=freed
            )
            res = ExecResult(status="failed", diagnosis=diag.disk_full(disk.describe(ctx.ws.root), e))
        else:
            log.exception("executor crashed", mp=mp.mp_id)
            res = ExecResult(status="failed", diagnosis=diag.engine_error(e))
    if res.status == "waiting":
        return parked(ctx, run.run_id, mp.mp_id, res.extra["waiting"])
    if watch.request is not None and res.status in ("interrupted", "cancelled"):
        return cancelled(ctx, run, ledger, mp, executor.name, res, watch.request)
    if res.status == "interrupted":
        resume_point = next((s.step_id for s in ledger.model.steps if s.status.value != "completed"), None)
        ctx.events.emit("mp_checkpointed", mp=mp.mp_id, run=run.run_id, resume_point=resume_point)
        return TickResult(Action.INTERRUPTED, mp_id=mp.mp_id, run_id=run.run_id)
    outcome = ended(ledger, run, mp, executor.name, res, ENDED_AS.get(res.status, ERROR))
    if outcome.status == CANCELLED:  # with no cancel request: a person answered `cancel` to a plan (issue #42)
        ctx.events.emit("mp_cancelled", mp=mp.mp_id, run=run.run_id, source="answer")
    for carried in ("diagnosis", "error_output", "error_output_ref"):  # what the executor found
        setattr(outcome, carried, getattr(res, carried))
    if outcome.status == ERROR:
        outcome.halt_token = mp.mp_id
        if ctx.advise is not None and res.diagnosis is not None and not res.extra.get("answerable"):
            suggest(ctx, step_ctx, outcome)  # (a run that asks a person, or paused, waits for them)
    if watch.request is not None:  # it came as the MP ended: the result stands
        outcome.notes.insert(0, f"A cancel request ({watch.request.who}) came as the MP ended; it had no effect.")
        consume(watch.request)
    ledger.set_outcome(outcome.to_dict())
    return finalize(ctx, run, ledger)


def parked(ctx: EngineContext, run_id: str, mp_id: str, waiting: dict[str, Any]) -> TickResult:
    """The run waits until `waiting["resume_at"]` (it stays open): the state says so, and
    the event `mp_waiting`, once per wait (a polled wait's later looks come `again`)."""
    again = waiting.pop("again", False)
    ctx.state.update(waiting=waiting, reason=f"waiting: {waiting['kind']} until {waiting['resume_at']}")
    if not again:
        ctx.events.emit("mp_waiting", mp=mp_id, run=run_id, **waiting)
    return TickResult(
        Action.WAITING,
        mp_id=mp_id,
        run_id=run_id,
        wait_until=time.monotonic() + seconds_until(waiting["resume_at"]),
        detail=f"{waiting['kind']}: resumes at {waiting['resume_at']}",
    )


def suggest(ctx: EngineContext, step_ctx: StepContext, outcome: Outcome) -> None:
    """`[diagnose] level`'s opinion on the failure, beside the engine's (the agent executor's
    `advise`, which the engine gives the context when `[diagnose]` is on)."""
    assert outcome.diagnosis is not None and ctx.advise is not None
    found = ctx.advise(step_ctx, outcome.diagnosis, outcome.error_output)
    if found is None:
        return
    run, mp = step_ctx.run, step_ctx.mp
    outcome.extra = {**outcome.extra, "suggestion": found.to_dict()}
    outcome.extra["sections"] = [*outcome.extra.get("sections", []), found.section()]
    ctx.events.emit("mp_diagnosed", mp=mp.mp_id, run=run.run_id, level=found.level, answered=bool(found.root_cause))


def ended(ledger: Ledger, run: RunArchive, mp: MicroProject, executor: str, res: ExecResult, status: str) -> Outcome:
    """The outcome of a run that ran: what the executor reported, timed from the claim."""
    outcome = Outcome(
        status=status,
        mp_id=mp.mp_id,
        title=mp.title,
        run_id=run.run_id,
        mp_sha256=mp.sha256,
        started_at=ledger.model.created_at,
        finished_at=now_iso(),
        executor=executor,
        steps=res.steps,
        checks=res.checks,
        notes=list(mp.notes),
        extra=res.extra,
    )
    outcome.duration = (parse_iso(outcome.finished_at) - parse_iso(outcome.started_at)).total_seconds()
    return outcome


def cancelled(
    ctx: EngineContext,
    run: RunArchive,
    ledger: Ledger,
    mp: MicroProject,
    executor: str,
    res: ExecResult,
    req: CancelRequest,
) -> TickResult:
    """End a run stopped by a cancel request: a CANCELLED result with what ran, no halt."""
    if not ctx.stop.is_set():
        ctx.stop_now.clear()  # it was the cancel's; the engine goes on
    done = sum(1 for r in res.steps + res.checks if r.status == "ok")
    outcome = ended(ledger, run, mp, executor, res, CANCELLED)
    outcome.notes.insert(
        0,
        f"Cancelled at the request of {req.who} after {done} block(s) had run; "
        "the step that was running was stopped with its whole process group.",
    )
    ctx.events.emit("mp_cancelled", mp=mp.mp_id, run=run.run_id, source=req.source)
    ledger.set_outcome(outcome.to_dict())
    return consumed(req, lambda: finalize(ctx, run, ledger))
