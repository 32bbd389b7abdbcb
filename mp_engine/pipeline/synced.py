"""What the engine does with a sync point that brought a problem (a conflict, commits the
engine does not accept, a rewritten history): an ERROR result of its own, recorded as a
run that never ran and published like any other. And after a run ended, old runs are
pruned (`[archive]`) and the deletions published, which is a sync point too.

(The files a pull integrated need nothing here: the channel tells the inbox itself.)
"""

from __future__ import annotations

from dataclasses import replace

from mp_engine.pipeline.context import EngineContext, TickResult
from mp_engine.pipeline.finalize import finalize
from mp_engine.record.retention import prune
from mp_engine.record.unrun import error_run
from mp_engine.sync.pull import SyncOutcome


def after_sync(ctx: EngineContext, out: SyncOutcome | None) -> TickResult | None:
    """The ERROR result of a sync point's problem, or None when it brought none."""
    if out is None or out.problem is None:
        return None
    mp_id = out.problem_mp or (ctx.state.read().last_result or {}).get("mp_id")
    run, ledger = error_run(ctx.ws, ctx.events, mp_id=mp_id, diagnosis=out.problem)
    ctx.events.emit("sync_blocked", run=run.run_id, kind=out.problem.kind, summary=out.problem.summary)
    result = finalize(ctx, run, ledger)
    return after_sync(ctx, result.sync) or replace(result, sync=None)


def prune_runs(ctx: EngineContext) -> TickResult | None:
    """Apply `[archive]` retention (record/retention.py) after a run ended and publish the
    deletions in one commit. The run of a halt and the run in progress are never pruned."""
    cfg = ctx.config.archive
    state = ctx.state.read()
    protect = {r for r in (state.halt.run_id if state.halt else None, state.run_id) if r}
    removed = prune(ctx.ws, cfg.keep_runs, cfg.max_bytes, protect, check_bytes=ctx.finalized % 10 == 1)
    if not removed:
        return None
    ctx.events.emit("runs_pruned", count=len(removed), oldest=removed[0], newest=removed[-1])
    return after_sync(ctx, ctx.channel.publish(f"mp-engine: pruned {len(removed)} old run(s)", None))
