"""The start of a run: claim an MP from the inbox, refuse one that cannot run, or take
back a run that a crash or a stop left open (FR-EVT-WF-RECOVERY)."""

from __future__ import annotations

from mp_engine.core.atomic import sha256_file
from mp_engine.core.errors import InvalidMPError
from mp_engine.core.workspace import EVENTS_FILE
from mp_engine.execute.process import kill_marked_groups, kill_stale_group
from mp_engine.inbox.header import parse_header_line, sha256_hex
from mp_engine.inbox.intake import Entry, EntryKind
from mp_engine.inbox.mpfile import MicroProject, parse
from mp_engine.pipeline.context import EngineContext
from mp_engine.record import diagnosis as diag
from mp_engine.record.archive import RunArchive, fill_run, reserve_run
from mp_engine.record.ledger import Ledger, StepStatus
from mp_engine.record.state import Status
from mp_engine.record.unrun import error_run


def claim(
    ctx: EngineContext, mp: MicroProject, data: bytes, executor_name: str, *, source: str | None = None
) -> tuple[RunArchive, Ledger]:
    """Reserve a run, publish RUNNING, archive the MP and tell the channel.

    The run id is reserved (one mkdir) and RUNNING published first; the archive copy and
    the ledger are written next and fsynced before the first side effect. Drop ->
    RUNNING then costs one directory and one durable write. After a crash in between,
    recovery finds no readable ledger, clears the run pointer, removes the unfilled run
    and claims the MP again from the inbox.

    `source`: the queue entry the MP was taken from (inbox/queue.py); such a run leaves
    the slot, which holds a newer MP, alone."""
    run = reserve_run(ctx.ws, mp.mp_id)
    ctx.events.tee = run.dir / EVENTS_FILE
    # Not durable (content fsynced, the rename not): the run it names is made durable only
    # after it, and recovery goes by the runs, not by a RUNNING it may find or not.
    ctx.state.update(current=mp.mp_id, status=Status.RUNNING, run_id=run.run_id, reason="MP claimed", durable=False)
    inbox_entry = "untouched" if source else "delete"
    ledger = fill_run(
        run,
        mp_id=mp.mp_id,
        data=data,
        mp_sha256=mp.sha256,
        executor=executor_name,
        source=source,
        inbox_entry=inbox_entry,
    )
    run.make_durable(ledger)
    ctx.events.emit("mp_claimed", mp=mp.mp_id, run=run.run_id, sha256=mp.sha256, title=mp.title, source=source)
    ctx.inbox.run_started(mp.sha256, from_slot=source is None)
    ctx.channel.running(mp.mp_id, run.run_id)
    return run, ledger


def reject(ctx: EngineContext, entry: Entry, data: bytes | None, err: InvalidMPError) -> tuple[RunArchive, Ledger]:
    """An inbox entry that is not a runnable MP: a run with an ERROR outcome; the entry is
    deleted (a file we read) or archived (a directory, a link, an unreadable file)."""
    mp_id = err.mp_id
    if mp_id is None and data is not None:
        try:
            mp_id = parse_header_line(data.decode("utf-8", errors="replace").split("\n"))[1]
        except InvalidMPError:
            mp_id = None
    if data is not None:
        sha = sha256_hex(data)
    else:
        sha = sha256_file(entry.path) if entry.kind is EntryKind.FILE else ""
    run, ledger = error_run(
        ctx.ws,
        ctx.events,
        mp_id=mp_id,
        diagnosis=diag.invalid_mp(err.reason, err.fix, err.line),
        data=data,
        sha256=sha,
        inbox_entry="archive" if data is None else "delete",
    )
    ctx.events.emit("mp_rejected", mp=mp_id, run=run.run_id, reason=err.reason, kind=entry.kind.value)
    return run, ledger


def reopen(ctx: EngineContext, run: RunArchive, *, quiet: bool = False) -> MicroProject | Exception:
    """Take back an open run after a crash or a stop: kill what its steps left running,
    record the recovery, and return the MP to drive again (or why it cannot be read).
    `quiet`: the run comes back from a wait it polls (a pull request's CI): when none of
    its steps was left running there is nothing to recover, and nothing is recorded or said
    (one wait, however many looks)."""
    ledger = run.ledger()
    if not quiet or any(s.status is StepStatus.IN_PROGRESS for s in ledger.model.steps):
        recover(ctx, run, ledger)
    try:
        data = run.mp_copy.read_bytes()
        return parse(data, max_bytes=max(ctx.config.engine.max_mp_bytes, len(data)))
    except (OSError, InvalidMPError) as e:
        return e


def recover(ctx: EngineContext, run: RunArchive, ledger: Ledger) -> None:
    """The recovery of an open run (FR-EVT-WF-RECOVERY): what its steps left running killed,
    the ledger's steps settled, the recovery recorded and said."""
    rec = ledger.recover(run.steps_dir, reason="engine restarted with this run unfinished")
    killed = [pid for pgid, started in rec.stale_groups for pid in kill_stale_group(pgid, started)]
    for step_id in rec.unrecorded:  # spawned, but the engine died before recording the group
        killed += kill_marked_groups([f"MP_RUN_DIR={run.dir}", f"MP_STEP={step_id}"])
    ctx.events.emit(
        "recovery",
        run=run.run_id,
        mp=ledger.model.mp_id,
        resume_point=rec.resume_point,
        steps_recovered=rec.steps_recovered,
        steps_to_retry=rec.steps_to_retry,
        killed_pids=killed or None,
        policy=ctx.config.recovery.interrupted_step,
    )
