"""The end of a run: publish its recorded outcome (result, inbox cleared, state, ledger
closed, commit and push). Idempotent, so a crash anywhere in it is finished next tick.

`record_error_run()` is the one way to end an MP that was refused or failed before it
started (an invalid MP, a signature refusal, a sync problem, an unreadable archive);
`record_superseded_run()` ends one that was replaced before it ran, `record_unrun()` any
MP that ends without running and without a halt.
"""

from __future__ import annotations

import os

from mp_engine.atomic import sha256_file
from mp_engine.clock import now_iso
from mp_engine.context import EngineContext, TickResult
from mp_engine.inbox.intake import CLAIMED_PREFIX
from mp_engine.record.archive import RunArchive, create_run
from mp_engine.record.diagnosis import REFUSED_KIND, Diagnosis
from mp_engine.record.digest import write_digest
from mp_engine.record.ledger import Ledger
from mp_engine.record.outcome import CANCELLED, COMPLETED, ERROR, NO_HALT, SUPERSEDED, Outcome
from mp_engine.record.result import write_result
from mp_engine.record.retention import prune
from mp_engine.record.state import IDLE, Halt, Status
from mp_engine.sync.pull import SyncOutcome
from mp_engine.workspace import EVENTS_FILE


def record_error_run(
    ctx: EngineContext,
    *,
    mp_id: str | None,
    diagnosis: Diagnosis,
    data: bytes | None = None,
    sha256: str = "",
    inbox_entry: str = "untouched",
    into: RunArchive | None = None,
    source: str | None = None,
) -> tuple[RunArchive, Ledger]:
    """A run whose recorded outcome is ERROR with `diagnosis` (finalize publishes it): a new
    one, or `into`, an open run that cannot go on. `inbox_entry`: "delete" the MP we
    refused, "archive" a bad entry, or leave it "untouched". `source`: the queue entry
    the MP came from."""
    now = now_iso()
    if into is None:
        run, ledger = _unrun(ctx, mp_id, data, sha256, source, inbox_entry)
        started, executor = now, "none"
    else:
        run, ledger = into, into.ledger()
        sha256, started, executor = ledger.model.mp_sha256, ledger.model.created_at, "shell"
        ctx.events.tee = run.dir / EVENTS_FILE
    outcome = Outcome(
        status=ERROR,
        mp_id=mp_id or "UNPARSED",
        title="",
        run_id=run.run_id,
        mp_sha256=sha256,
        started_at=started,
        finished_at=now,
        executor=executor,
        diagnosis=diagnosis,
        # An MP refused before anything ran does not halt (issue #15): nothing to approve.
        halt_token=None if diagnosis.kind == REFUSED_KIND else (mp_id or run.run_id),
    )
    if into is None and inbox_entry == "archive":
        outcome.notes.append(f"The inbox entry was moved to {ctx.ws.rel(run.moved_entry)}.")
    ledger.set_outcome(outcome.to_dict())
    return run, ledger


def _unrun(
    ctx: EngineContext, mp_id: str | None, data: bytes | None, sha256: str, source: str | None, inbox_entry: str
) -> tuple[RunArchive, Ledger]:
    """A new run for an MP that does not run (refused, failed before it started, or
    superseded), with the run's events teed into it."""
    run, ledger = create_run(
        ctx.ws, mp_id=mp_id, data=data, mp_sha256=sha256, executor="none", source=source, inbox_entry=inbox_entry
    )
    ctx.events.tee = run.dir / EVENTS_FILE
    return run, ledger


def record_superseded_run(
    ctx: EngineContext, *, mp_id: str | None, title: str, data: bytes, sha256: str, why: str, source: str
) -> tuple[RunArchive, Ledger]:
    """A run for an MP that was replaced before it ran: archived, never executed, and
    ended with a SUPERSEDED result (no halt), so every MP that arrived has one result."""
    note = f"Not run: {why}. Send it again if it is still wanted."
    run, ledger = record_unrun(
        ctx, status=SUPERSEDED, mp_id=mp_id, title=title, data=data, sha256=sha256, note=note, source=source
    )
    ctx.events.emit("mp_superseded", mp=mp_id, run=run.run_id, sha256=sha256, reason=why)
    return run, ledger


def record_unrun(
    ctx: EngineContext,
    *,
    status: str,
    mp_id: str | None,
    title: str,
    data: bytes,
    sha256: str,
    note: str,
    source: str | None = None,
    inbox_entry: str = "untouched",
) -> tuple[RunArchive, Ledger]:
    """A run for an MP that ends without running and without a halt (SUPERSEDED, or
    CANCELLED before it started): archived, with `note` saying why."""
    run, ledger = _unrun(ctx, mp_id, data, sha256, source, inbox_entry)
    now = now_iso()
    outcome = Outcome(
        status=status,
        mp_id=mp_id or "UNPARSED",
        title=title,
        run_id=run.run_id,
        mp_sha256=sha256,
        started_at=now,
        finished_at=now,
        executor="none",
        notes=[note],
    )
    ledger.set_outcome(outcome.to_dict())
    return run, ledger


def after_sync(ctx: EngineContext, out: SyncOutcome) -> TickResult | None:
    """Act on a sync point: pulled files are complete; a sync problem is an ERROR result."""
    if out.integrated:
        ctx.inbox.note_complete()  # git wrote the inbox file whole, under our lock
    if out.problem is None:
        return None
    mp_id = out.problem_mp or (ctx.state.read().last_result or {}).get("mp_id")
    run, ledger = record_error_run(ctx, mp_id=mp_id, diagnosis=out.problem)
    ctx.events.emit("sync_blocked", run=run.run_id, kind=out.problem.kind, summary=out.problem.summary)
    return finalize(ctx, run, ledger)


def finalize(ctx: EngineContext, run: RunArchive, ledger: Ledger) -> TickResult:
    """Publish a recorded outcome: result, inbox cleared, state, ledger closed, push."""
    assert ledger.model.outcome is not None
    outcome = Outcome.from_dict(ledger.model.outcome)
    if (notice := ctx.channel.notice()) is not None:
        outcome.notes.append(f"Git: {notice}. This result is committed on the engine host and not pushed.")
    digest = write_digest(ctx.ws, outcome, redact=ctx.redact)
    write_result(ctx.ws, run, outcome, redact=ctx.redact, also=digest)
    last_result = {
        "mp_id": outcome.mp_id,
        "mp_sha256": outcome.mp_sha256,
        "status": outcome.status,
        "run_id": run.run_id,
        "finished_at": outcome.finished_at,
    }
    clear_inbox(ctx, run, ledger)  # before the state says done: an orchestrator may then drop the next MP
    halts = outcome.status not in NO_HALT and outcome.halt_token is not None
    if not halts and ctx.state.read().halt is not None:
        # Replaced or refused while the engine was halted: the halt stands, and its state.
        ctx.state.update(run_id=None, last_result=last_result, reason=outcome.commit_summary)
    elif not halts:
        done = {"last_completed": outcome.mp_id} if outcome.status == COMPLETED else {}
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
    ledger.close()
    if outcome.status == COMPLETED:
        ctx.events.emit("mp_completed", mp=outcome.mp_id, run=run.run_id, duration=outcome.duration)
        result = TickResult("completed", mp_id=outcome.mp_id, run_id=run.run_id)
    elif outcome.status == SUPERSEDED:
        result = TickResult("superseded", mp_id=outcome.mp_id, run_id=run.run_id)
    elif outcome.status == CANCELLED:
        result = TickResult("cancelled", mp_id=outcome.mp_id, run_id=run.run_id)
    else:
        assert outcome.diagnosis is not None
        d = outcome.diagnosis
        ctx.events.emit("mp_failed", mp=outcome.mp_id, run=run.run_id, kind=d.kind, summary=d.summary, fix=d.fix)
        if halts:
            ctx.events.emit("halted", mp=outcome.mp_id, approve_with=f"Approves: {outcome.halt_token}")
        result = TickResult("error", mp_id=outcome.mp_id, run_id=run.run_id, detail=d.summary)
    ctx.events.sync()  # the MP's events are durable with its result (one fsync)
    ctx.events.tee = None  # the run's own copy is complete: it travels with the commit
    failed = after_sync(ctx, ctx.channel.publish(outcome.commit_summary, run.run_id))
    work = outcome.extra.get("work") or {}
    if work.get("branch") and not work.get("landed"):
        ctx.channel.push_branch(work["branch"])  # the partial (or unmerged) agent work
    ctx.inbox.run_ended()
    return failed or prune_runs(ctx) or result


def prune_runs(ctx: EngineContext) -> TickResult | None:
    """Apply `[archive]` retention (record/retention.py) and publish the deletions in one
    commit. The run of a halt and the run in progress are never pruned."""
    cfg = ctx.config.archive
    ctx.finalized += 1
    state = ctx.state.read()
    protect = {r for r in (state.halt.run_id if state.halt else None, state.run_id) if r}
    removed = prune(ctx.ws, cfg.keep_runs, cfg.max_bytes, protect, check_bytes=ctx.finalized % 10 == 1)
    if not removed:
        return None
    ctx.events.emit("runs_pruned", count=len(removed), oldest=removed[0], newest=removed[-1])
    return after_sync(ctx, ctx.channel.publish(f"mp-engine: pruned {len(removed)} old run(s)", None))


def clear_inbox(ctx: EngineContext, run: RunArchive, ledger: Ledger) -> None:
    """Take this run's MP out of the inbox, leaving any newer MP that replaced it.

    The entry is first renamed aside (inside the inbox, so watchers see a paired move,
    not a lone IN_MOVED_FROM that watchdog holds back for 0.5 s) and only then compared,
    so a newer MP renamed in between a check and a delete is never the one deleted.
    Idempotent: a crash at any point is finished by the next `finalize`.
    """
    ws = ctx.ws
    if ledger.model.inbox_entry == "untouched" or os.path.lexists(run.moved_entry):
        return
    aside = ws.inbox_dir / f"{CLAIMED_PREFIX}{run.run_id}"
    if not os.path.lexists(aside):
        if ctx.inbox.lstat_entry() is None:
            return
        try:
            os.rename(ws.inbox_file, aside)
        except FileNotFoundError:
            return
    regular = os.path.isfile(aside) and not os.path.islink(aside)
    archive = ledger.model.inbox_entry == "archive"
    # Ours: the bad entry this run was about (archive), or a file with the bytes we ran.
    if (archive and not regular) or (regular and sha256_file(aside) == ledger.model.mp_sha256):
        ctx.inbox.forget()
        if archive:
            os.rename(aside, run.moved_entry)
        else:
            os.unlink(aside)  # the MP itself is archived as mp.txt
        return
    # A different MP arrived during the run: put it back, never over an even newer one.
    try:
        if regular:
            os.link(aside, ws.inbox_file, follow_symlinks=False)  # fails if the slot is taken
        elif os.path.lexists(ws.inbox_file):  # a directory or link cannot be hard-linked
            raise FileExistsError(ws.inbox_file)
        else:
            os.rename(aside, ws.inbox_file)
    except FileExistsError:
        os.rename(aside, run.moved_entry)
        ctx.events.emit(
            "inbox_superseded",
            run=run.run_id,
            kept=ws.rel(run.moved_entry),
            detail="two newer MPs arrived during the run; the newest is in the inbox, the other is kept here",
        )
        return
    if os.path.lexists(aside):
        os.unlink(aside)
    ctx.events.emit(
        "inbox_replaced", run=run.run_id, detail="a different MP arrived during the run; it stays in the inbox"
    )
