"""Runs of MPs that never ran: every MP that arrives ends with one result, including one
that is refused (invalid, unsigned), fails before it starts (an unreadable archive, a
sync problem), is replaced before it runs (SUPERSEDED) or is cancelled before it starts.

Each is a run in the archive with its outcome recorded in the ledger, exactly like a run
that ran; `finalize` then publishes it. The run's events are teed into it.
"""

from __future__ import annotations

from mp_engine.core.clock import now_iso
from mp_engine.core.events import EventLog
from mp_engine.core.workspace import EVENTS_FILE, Workspace
from mp_engine.record.archive import RunArchive, create_run
from mp_engine.record.diagnosis import REFUSED_KIND, Diagnosis
from mp_engine.record.ledger import Ledger
from mp_engine.record.outcome import ERROR, SUPERSEDED, Outcome


def error_run(
    ws: Workspace,
    events: EventLog,
    *,
    mp_id: str | None,
    diagnosis: Diagnosis,
    data: bytes | None = None,
    sha256: str = "",
    inbox_entry: str = "untouched",
    into: RunArchive | None = None,
    source: str | None = None,
) -> tuple[RunArchive, Ledger]:
    """A run whose recorded outcome is ERROR with `diagnosis`: a new one, or `into`, an open
    run that cannot go on. `inbox_entry`: "delete" the MP we refused, "archive" a bad entry,
    or leave it "untouched". `source`: the queue entry the MP came from."""
    now = now_iso()
    if into is None:
        run, ledger = _new(ws, events, mp_id, data, sha256, source, inbox_entry)
        started, executor = now, "none"
    else:
        run, ledger = into, into.ledger()
        sha256, started, executor = ledger.model.mp_sha256, ledger.model.created_at, "shell"
        events.tee = run.dir / EVENTS_FILE
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
        outcome.notes.append(f"The inbox entry was moved to {ws.rel(run.moved_entry)}.")
    ledger.set_outcome(outcome.to_dict())
    return run, ledger


def ended_run(
    ws: Workspace,
    events: EventLog,
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
    run, ledger = _new(ws, events, mp_id, data, sha256, source, inbox_entry)
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


def superseded_run(
    ws: Workspace,
    events: EventLog,
    *,
    mp_id: str | None,
    title: str,
    data: bytes,
    sha256: str,
    why: str,
    source: str,
) -> tuple[RunArchive, Ledger]:
    """A run for an MP that was replaced before it ran: archived, never executed, and
    ended with a SUPERSEDED result (no halt), so every MP that arrived has one result."""
    note = f"Not run: {why}. Send it again if it is still wanted."
    run, ledger = ended_run(
        ws, events, status=SUPERSEDED, mp_id=mp_id, title=title, data=data, sha256=sha256, note=note, source=source
    )
    events.emit("mp_superseded", mp=mp_id, run=run.run_id, sha256=sha256, reason=why)
    return run, ledger


def _new(
    ws: Workspace,
    events: EventLog,
    mp_id: str | None,
    data: bytes | None,
    sha256: str,
    source: str | None,
    inbox_entry: str,
) -> tuple[RunArchive, Ledger]:
    run, ledger = create_run(
        ws, mp_id=mp_id, data=data, mp_sha256=sha256, executor="none", source=source, inbox_entry=inbox_entry
    )
    events.tee = run.dir / EVENTS_FILE
    return run, ledger
