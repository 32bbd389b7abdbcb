"""Taking the queued MPs (inbox/queue.py): each runs, is refused, or ends SUPERSEDED, in
the order it arrived, before the MP in the slot (docs/PROTOCOL.md §2).

A queued `git` version runs from the queue (the slot holds a newer MP, which the run
leaves alone). A `slot` or `seen` version still in the slot runs from there in its turn;
one no longer there was replaced before it ran: a `seen` one (or any the halt holds)
ends SUPERSEDED, a `slot` one runs. Admission is the slot's (admit.py). Every run
records its queue entry as its source, so a restart never takes an entry twice.
"""

from __future__ import annotations

from collections.abc import Mapping

from mp_engine.core.errors import InvalidMPError
from mp_engine.execute.base import Executor
from mp_engine.inbox.header import sha256_hex
from mp_engine.inbox.mpfile import MicroProject, parse
from mp_engine.inbox.queue import FROM_QUEUE, SEEN, Queued
from mp_engine.pipeline.admit import Admitted, Held, Refused, admit
from mp_engine.pipeline.claim import claim
from mp_engine.pipeline.context import Action, EngineContext, TickResult
from mp_engine.pipeline.drive import drive
from mp_engine.pipeline.finalize import finalize
from mp_engine.record import diagnosis as diag
from mp_engine.record.archive import runs_of
from mp_engine.record.state import SessionState
from mp_engine.record.unrun import error_run, superseded_run


def take_queued(ctx: EngineContext, state: SessionState, executors: Mapping[str, Executor]) -> TickResult | None:
    """Run, refuse or supersede the oldest queued MP (inbox/queue.py); None when every
    queued version is the one in the slot, which then runs from there."""
    slot = ctx.inbox.waiting_bytes()
    slot_sha = sha256_hex(slot) if slot is not None else None
    for q in ctx.inbox.queue.entries():
        if q.kind not in FROM_QUEUE and q.sha256 == slot_sha:
            continue  # still in the slot: it runs from there, in its turn
        try:
            data = q.data()
        except OSError as e:
            ctx.inbox.queue.remove(q.id)
            ctx.events.emit("inbox_queue_lost", entry=q.id, error=str(e))
            continue
        return _take_entry(ctx, state, q, data, slot_sha is not None, executors)
    return None


def _take_entry(
    ctx: EngineContext, state: SessionState, q: Queued, data: bytes, slot_taken: bool, executors: Mapping[str, Executor]
) -> TickResult:
    parsed: MicroProject | InvalidMPError
    try:  # a queued version was within the size cap when it arrived
        parsed = parse(data, max_bytes=max(ctx.config.engine.max_mp_bytes, len(data)))
    except InvalidMPError as e:
        parsed = e
    mp_id, title = parsed.mp_id, parsed.title if isinstance(parsed, MicroProject) else ""
    if any(r.ledger().model.source == q.source for r in runs_of(ctx.ws, mp_id or "UNPARSED", q.sha256)):
        ctx.inbox.queue.remove(q.id)  # its run exists: a restart found it still queued
        return TickResult(Action.IDLE, mp_id=mp_id, detail=f"queued entry {q.id} already taken")
    if q.kind == SEEN:
        why = "a newer MP replaced it in the inbox" if slot_taken else "it was removed from the inbox"
        return _superseded(ctx, q, data, mp_id, title, why)
    verdict = admit(ctx, state, data, parsed, executors, from_slot=False)
    if isinstance(verdict, Held):
        why = "a newer MP arrived while the engine was halted and this one does not approve the halt"
        return _superseded(ctx, q, data, mp_id, title, why)
    if isinstance(verdict, Refused):
        refused = verdict.error
        run, ledger = error_run(
            ctx.ws,
            ctx.events,
            mp_id=refused.mp_id or mp_id,
            diagnosis=diag.invalid_mp(refused.reason, refused.fix, refused.line),
            data=data,
            sha256=q.sha256,
            source=q.source,
        )
        ctx.inbox.queue.remove(q.id)
        return finalize(ctx, run, ledger)
    assert isinstance(verdict, Admitted), verdict  # `Ended` comes only from the slot
    run, ledger = claim(ctx, verdict.mp, data, verdict.executor.name, source=q.source)
    ctx.inbox.queue.remove(q.id)
    return drive(ctx, run, ledger, verdict.mp, verdict.executor)


def _superseded(ctx: EngineContext, q: Queued, data: bytes, mp_id: str | None, title: str, why: str) -> TickResult:
    run, ledger = superseded_run(
        ctx.ws,
        ctx.events,
        mp_id=mp_id,
        title=title,
        data=data,
        sha256=q.sha256,
        why=why + " before it ran",
        source=q.source,
    )
    ctx.inbox.queue.remove(q.id)
    return finalize(ctx, run, ledger)
