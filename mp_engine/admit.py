"""Admission: whether an MP that reached the engine (the inbox slot, or a version the
slot lost, queued) runs now. One path for both:

  1. a signature refusal (the pull that brought it): refused, whatever a halt says;
  2. parse, the executor it names, the executor's own validation: an invalid MP is
     refused, or held while the engine is halted;
  3. from the slot only: an arrival git put back after it already ran is dropped, and a
     cancel request naming it ends it CANCELLED before it starts;
  4. the halt: held, unless its `Approves:` names the halt, which admission then lifts.

The verdict says what the caller does next: claim and drive (`Admitted`), record the
refusal (`Refused`), leave it (`Held`), or nothing, admission having ended it (`Ended`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mp_engine.cancel_waiting import cancel_before_start
from mp_engine.context import Action, EngineContext, TickResult
from mp_engine.errors import InvalidMPError
from mp_engine.execute.base import Executor
from mp_engine.finalize import release_slot
from mp_engine.inbox.mpfile import MicroProject, parse
from mp_engine.record.archive import RunArchive, runs_of
from mp_engine.record.state import SessionState

ExecutorFor = Callable[[MicroProject], Executor]


@dataclass(frozen=True)
class Admitted:
    mp: MicroProject
    executor: Executor


@dataclass(frozen=True)
class Refused:
    error: InvalidMPError


@dataclass(frozen=True)
class Held:
    why: str
    mp: MicroProject | None  # None: held because it is invalid


@dataclass(frozen=True)
class Ended:
    result: TickResult


Verdict = Admitted | Refused | Held | Ended


def admit(
    ctx: EngineContext,
    state: SessionState,
    data: bytes | None,
    executor_for: ExecutorFor,
    *,
    parsed: MicroProject | InvalidMPError | None = None,
    from_slot: bool = True,
) -> Verdict:
    """The verdict on the MP `data` (None: the slot's entry could not be read, `parsed`
    says why), or on one already `parsed`; see the module docstring."""
    refusal = ctx.channel.refusal_for(data) if data is not None else None
    if refusal is not None:  # a signature verdict: refused whatever the halt says
        return Refused(refusal)
    try:
        if isinstance(parsed, InvalidMPError):
            raise parsed
        assert data is not None
        mp = parsed or parse(data, max_bytes=ctx.config.engine.max_mp_bytes)
        executor = executor_for(mp)
        executor.validate(mp)
    except InvalidMPError as e:
        return Held(f"invalid MP ({e.reason})", None) if state.halt else Refused(e)
    if from_slot:
        assert data is not None
        if (earlier := _ran_already(ctx, mp, data)) is not None:
            return Ended(_drop_duplicate(ctx, mp, earlier))
        if (cancelled := cancel_before_start(ctx, mp, data)) is not None:
            return Ended(cancelled)
    halt = state.halt
    if halt is not None:
        if not (mp.approves and mp.approves in (halt.mp_id, halt.run_id)):
            why = f"its `Approves:` names {mp.approves}" if mp.approves else "it has no `Approves:` header"
            return Held(f"{mp.mp_id} waits: {why}", mp)
        ctx.state.update(halt=None, reason=f"approved by {mp.mp_id}")
        ctx.events.emit("approved", via="mp", approved=halt.mp_id, by=mp.mp_id)
    return Admitted(mp, executor)


def _ran_already(ctx: EngineContext, mp: MicroProject, data: bytes) -> RunArchive | None:
    """The run that already took this very arrival of the MP, if git put it back.
    Without git every drop is a new arrival, so the run archive is not even listed;
    with git, no git is asked unless an earlier run had exactly these bytes."""
    if not ctx.channel.enabled:
        return None
    return next((r for r in runs_of(ctx.ws, mp.mp_id, mp.sha256) if ctx.channel.same_arrival(r.run_id, data)), None)


def _drop_duplicate(ctx: EngineContext, mp: MicroProject, earlier: RunArchive) -> TickResult:
    """Remove the copy git put back, and commit that removal, instead of running the MP
    a second time."""
    release_slot(ctx, earlier, earlier.ledger())
    detail = f"{mp.mp_id} already ran as {earlier.run_id}; the copy a git operation put back is removed"
    ctx.events.emit("inbox_duplicate_dropped", mp=mp.mp_id, run=earlier.run_id)
    published = ctx.channel.publish(f"{mp.mp_id}: already ran as {earlier.run_id}", None)
    return TickResult(Action.IDLE, mp_id=mp.mp_id, run_id=earlier.run_id, detail=detail, sync=published)
