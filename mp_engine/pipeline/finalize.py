"""The end of a run: publish its recorded outcome (result, inbox slot released, state,
ledger closed, commit and push). Idempotent, so a crash anywhere in it is finished on
the next tick.

Every run reaches this module with its outcome already in its ledger: a run that ran
(drive.py), or one that never ran, recorded as such (record/unrun.py). The sync point it
ends with is returned in `TickResult.sync`, for the engine to answer (synced.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mp_engine.core.clock import now_iso
from mp_engine.inbox import slot
from mp_engine.pipeline.context import Action, EngineContext, TickResult
from mp_engine.record import memory
from mp_engine.record.archive import RunArchive
from mp_engine.record.digest import write_digest
from mp_engine.record.ledger import Ledger
from mp_engine.record.outcome import CANCELLED, COMPLETED, NO_HALT, SUPERSEDED, Outcome
from mp_engine.record.result import write_result
from mp_engine.record.state import IDLE, Halt, Status

ACTIONS = {COMPLETED: Action.COMPLETED, SUPERSEDED: Action.SUPERSEDED, CANCELLED: Action.CANCELLED}


def finalize(ctx: EngineContext, run: RunArchive, ledger: Ledger) -> TickResult:
    """Publish a recorded outcome: result, inbox slot released, state, ledger closed, push."""
    assert ledger.model.outcome is not None
    notice = ctx.channel.notice()
    outcome = Outcome.from_dict(ledger.model.outcome)
    if notice is not None:
        outcome.notes.append(f"Git: {notice}. This result is committed on the engine host and not pushed.")
    digest = write_digest(ctx.ws, outcome, redact=ctx.redact)
    write_result(ctx.ws, run, outcome, redact=ctx.redact, also=digest)
    _remember(ctx, run, outcome)
    release_slot(ctx, run, ledger)  # before the state says done: an orchestrator may then drop the next MP
    ctx.inbox.run_ended()  # what arrives from now on waits for the next pass, not for this run
    halts = outcome.status not in NO_HALT and outcome.halt_token is not None
    _record_state(ctx, run, outcome, halts)
    ledger.close()
    if outcome.status == COMPLETED:
        ctx.events.emit("mp_completed", mp=outcome.mp_id, run=run.run_id, duration=outcome.duration)
    result = TickResult(ACTIONS.get(outcome.status, Action.ERROR), mp_id=outcome.mp_id, run_id=run.run_id)
    if result.action is Action.ERROR:
        assert outcome.diagnosis is not None
        d = outcome.diagnosis
        ctx.events.emit("mp_failed", mp=outcome.mp_id, run=run.run_id, kind=d.kind, summary=d.summary, fix=d.fix)
        if halts:
            ctx.events.emit("halted", mp=outcome.mp_id, approve_with=f"Approves: {outcome.halt_token}")
        result = replace(result, detail=d.summary)
    ctx.events.sync()  # the MP's events are durable with its result (one fsync)
    ctx.events.tee = None  # the run's own copy is complete: it travels with the commit
    work = outcome.extra.get("work") or {}
    if work.get("branch") and not work.get("landed"):
        # The partial (or unmerged) agent work, pushed before the result that names it: a
        # crash in between pushes it again with the result (finalize is repeated).
        ctx.channel.push_branch(work["branch"])
    published = ctx.channel.publish(outcome.commit_summary, run.run_id)
    ctx.finalized += 1
    return replace(result, sync=published)


def release_slot(ctx: EngineContext, run: RunArchive, ledger: Ledger) -> None:
    """Take the run's MP out of the inbox slot, as its ledger says (inbox/slot.py)."""
    slot.release(
        ctx.inbox,
        run_id=run.run_id,
        how=ledger.model.inbox_entry,
        sha256=ledger.model.mp_sha256,
        keep_at=run.moved_entry,
        emit=ctx.events.emit,
    )


def _remember(ctx: EngineContext, run: RunArchive, outcome: Outcome) -> None:
    """An agent run's lessons into SYSTEM/memory.md (`[agent] memory`), once per run."""
    lessons = outcome.extra.get("lessons")
    if lessons and ctx.config.agent.memory:
        memory.remember(
            ctx.ws,
            mp_id=outcome.mp_id,
            run_id=run.run_id,
            day=(outcome.finished_at or now_iso())[:10],
            lessons=lessons,
            max_bytes=ctx.config.agent.memory_max_bytes,
            redact=ctx.redact,
        )


def _record_state(ctx: EngineContext, run: RunArchive, outcome: Outcome, halts: bool) -> None:
    """SESSION_STATE.json after the run: ONLINE and idle, or ERROR with the halt."""
    last_result = {
        "mp_id": outcome.mp_id,
        "mp_sha256": outcome.mp_sha256,
        "status": outcome.status,
        "run_id": run.run_id,
        "finished_at": outcome.finished_at,
    }
    if not halts and ctx.state.read().halt is not None:
        # Replaced or refused while the engine was halted: the halt stands, and its state.
        ctx.state.update(run_id=None, last_result=last_result, reason=outcome.commit_summary)
    elif not halts:
        done: dict[str, Any] = {"last_completed": outcome.mp_id} if outcome.status == COMPLETED else {}
        ctx.state.update(
            **done,
            current=IDLE,
            status=Status.ONLINE,
            run_id=None,
            last_result=last_result,
            reason=outcome.commit_summary,
        )
    else:
        assert outcome.diagnosis is not None
        halt = Halt(
            mp_id=outcome.halt_token or outcome.mp_id,
            run_id=run.run_id,
            reason=outcome.diagnosis.summary,
            since=now_iso(),
        )
        ctx.state.update(
            current=outcome.mp_id,
            status=Status.ERROR,
            run_id=None,
            halt=halt,
            last_result=last_result,
            reason=outcome.commit_summary,
        )
