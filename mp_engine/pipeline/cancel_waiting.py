"""Cancel requests between runs (the running MP's are watched by drive.py).

A request that names the MP waiting in the inbox cancels it before it starts: a CANCELLED
result, the MP archived, nothing run. Any other request (an MP that already ended, an id
nobody sent, a file naming no MP) is consumed with a `cancel_ignored` event that says
why, and, when it came through git, its removal is committed with that reason.
"""

from __future__ import annotations

import mp_engine.inbox.cancel_request as cancel
from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.mpfile import MicroProject, parse
from mp_engine.pipeline.context import EngineContext, TickResult
from mp_engine.pipeline.finalize import finalize
from mp_engine.record.outcome import CANCELLED
from mp_engine.record.unrun import ended_run
from mp_engine.sync.pull import SyncOutcome


def waiting_mp(ctx: EngineContext) -> str | None:
    """The id of the MP in the inbox slot, if it parses."""
    entry = ctx.inbox.lstat_entry()
    if entry is None or entry.sig.size > ctx.config.engine.max_mp_bytes:
        return None
    try:
        data = ctx.inbox.read(entry, ctx.config.engine.max_mp_bytes)
        return parse(data, max_bytes=ctx.config.engine.max_mp_bytes).mp_id if data else None
    except (InvalidMPError, OSError):
        return None


def settle(ctx: EngineContext) -> SyncOutcome | None:
    """Consume the requests that name no MP this engine could still cancel; one commit,
    whose sync point the engine answers (synced.py)."""
    found, unreadable = cancel.pending(ctx.ws)
    if not found and not unreadable:
        return None
    waiting = waiting_mp(ctx)
    last = ctx.state.read().last_result or {}
    reasons = []
    for req in found:
        if req.mp_id == waiting:
            continue  # `cancel_before_start` takes it when the MP is read
        if req.mp_id == last.get("mp_id"):
            why = f"{req.mp_id} had already ended ({last.get('status')}, run {last.get('run_id')})"
        else:
            why = f"no MP {req.mp_id} is running or waiting in the inbox"
        cancel.consume(req)
        ctx.events.emit("cancel_ignored", mp=req.mp_id, source=req.source, reason=why)
        reasons.append(f"cancel request for {req.mp_id} ignored: {why}")
    for path in unreadable:
        path.unlink(missing_ok=True)
        why = "its first line names no MP id (expected a line like `MP-1.4`)"
        ctx.events.emit("cancel_ignored", mp=None, source=path.name, reason=why)
        reasons.append(f"cancel request ignored: {why}")
    if not reasons:
        return None
    return ctx.channel.publish(f"mp-engine: {'; '.join(reasons)}"[:300], None)


def cancel_before_start(ctx: EngineContext, mp: MicroProject, data: bytes, req: cancel.CancelRequest) -> TickResult:
    """A CANCELLED result for the inbox MP that request `req` names."""
    run, ledger = ended_run(
        ctx.ws,
        ctx.events,
        status=CANCELLED,
        mp_id=mp.mp_id,
        title=mp.title,
        data=data,
        sha256=mp.sha256,
        note=f"Not run: cancelled at the request of {req.who} before it started.",
        inbox_entry="delete",
    )
    ctx.events.emit("mp_cancelled", mp=mp.mp_id, run=run.run_id, source=req.source, started=False)
    return cancel.consumed(req, lambda: finalize(ctx, run, ledger))
