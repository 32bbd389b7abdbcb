"""Taking the queued MPs (inbox/queue.py): each runs, is refused, or ends SUPERSEDED, in
the order it arrived, before the MP in the slot (docs/PROTOCOL.md §2).

A queued `git` version runs from the queue (the slot holds a newer MP, which the run
leaves alone). A `slot` or `seen` version still in the slot runs from there in its turn;
one no longer there was replaced before it ran: a `seen` one (or any while the engine is
halted and it does not approve the halt) ends SUPERSEDED, a `slot` one runs. Every run
records its queue entry as its source, so a restart never takes an entry twice.
"""

from __future__ import annotations

from collections.abc import Callable

from mp_engine.claim import claim
from mp_engine.context import EngineContext, TickResult
from mp_engine.drive import drive
from mp_engine.errors import InvalidMPError
from mp_engine.execute import Executor
from mp_engine.finalize import finalize, record_error_run, record_superseded_run
from mp_engine.inbox.header import sha256_hex
from mp_engine.inbox.mpfile import MicroProject, parse
from mp_engine.inbox.queue import GIT, SEEN, Queued
from mp_engine.record import diagnosis as diag
from mp_engine.record.archive import runs_of
from mp_engine.record.state import SessionState

ExecutorFor = Callable[[MicroProject], Executor]


def take_queued(ctx: EngineContext, state: SessionState, executor_for: ExecutorFor) -> TickResult | None:
    """Run, refuse or supersede the oldest queued MP (inbox/queue.py); None when every
    queued version is the one in the slot, which then runs from there."""
    slot = ctx.inbox.waiting_bytes()
    slot_sha = sha256_hex(slot) if slot is not None else None
    for q in ctx.inbox.queue.entries():
        if q.kind != GIT and q.sha256 == slot_sha:
            continue  # still in the slot: it runs from there, in its turn
        try:
            data = q.data()
        except OSError as e:
            ctx.inbox.queue.remove(q.id)
            ctx.events.emit("inbox_queue_lost", entry=q.id, error=str(e))
            continue
        return _take_entry(ctx, state, q, data, slot_sha, executor_for)
    return None


def _take_entry(
    ctx: EngineContext, state: SessionState, q: Queued, data: bytes, slot_sha: str | None, executor_for: ExecutorFor
) -> TickResult:
    mp: MicroProject | InvalidMPError
    try:
        mp = parse(data, max_bytes=max(ctx.config.engine.max_mp_bytes, len(data)))
    except InvalidMPError as e:
        mp = e
    mp_id = mp.mp_id if isinstance(mp, MicroProject) else mp.mp_id
    if any(r.ledger().model.source == q.source for r in runs_of(ctx.ws, mp_id or "UNPARSED", q.sha256)):
        ctx.inbox.queue.remove(q.id)  # its run exists: a restart found it still queued
        return TickResult("idle", mp_id=mp_id, detail=f"queued entry {q.id} already taken")
    halt = state.halt
    approves = bool(halt and isinstance(mp, MicroProject) and mp.approves in (halt.mp_id, halt.run_id))
    if q.kind == SEEN or (halt and not approves):
        if q.kind != SEEN:
            why = "a newer MP arrived while the engine was halted and this one does not approve the halt"
        else:
            why = "a newer MP replaced it in the inbox" if slot_sha else "it was removed from the inbox"
        why += " before it ran"
        title = mp.title if isinstance(mp, MicroProject) else ""
        run, ledger = record_superseded_run(
            ctx, mp_id=mp_id, title=title, data=data, sha256=q.sha256, why=why, source=q.source
        )
        ctx.inbox.queue.remove(q.id)
        return finalize(ctx, run, ledger)
    try:
        if (refusal := ctx.channel.refusal_for(data)) is not None:
            raise refusal
        if isinstance(mp, InvalidMPError):
            raise mp
        executor = executor_for(mp)
        executor.validate(mp)
    except InvalidMPError as e:
        run, ledger = record_error_run(
            ctx,
            mp_id=e.mp_id or mp_id,
            diagnosis=diag.invalid_mp(e.reason, e.fix, e.line),
            data=data,
            sha256=q.sha256,
            source=q.source,
        )
        ctx.inbox.queue.remove(q.id)
        return finalize(ctx, run, ledger)
    if approves and halt is not None:
        ctx.state.update(halt=None, reason=f"approved by {mp.mp_id}")
        ctx.events.emit("approved", via="mp", approved=halt.mp_id, by=mp.mp_id)
    run, ledger = claim(ctx, mp, data, executor.name, source=q.source)
    ctx.inbox.queue.remove(q.id)
    return drive(ctx, run, ledger, mp, executor)
