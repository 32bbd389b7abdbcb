"""Runs of MPs that never ran (mp_engine/record/unrun.py): archived with their outcome, a
halt token only for what ran or failed, none for a refusal."""

from __future__ import annotations

from mp_engine.core.events import EventLog
from mp_engine.record.archive import create_run
from mp_engine.record.diagnosis import Diagnosis, invalid_mp
from mp_engine.record.unrun import ended_run, error_run, superseded_run

MP = b"# MP-5.1 Done\n\n```bash\ntrue\n```\n"
PROBLEM = Diagnosis("git_conflict", "git conflict with the remote", "Both sides changed X.", "Revert X.")


def test_an_error_run_halts_on_its_mp_id_and_tees_its_events(ws):
    log = EventLog(ws.events_file)
    run, ledger = error_run(ws, log, mp_id="MP-5.3", diagnosis=PROBLEM, data=MP, sha256="abc")
    outcome = ledger.model.outcome
    assert (outcome["status"], outcome["halt_token"], outcome["executor"]) == ("ERROR", "MP-5.3", "none")
    assert run.mp_copy.read_bytes() == MP and log.tee == run.dir / "events.jsonl"


def test_a_refused_mp_does_not_halt(ws):
    run, ledger = error_run(ws, EventLog(ws.events_file), mp_id="MP-5.5", diagnosis=invalid_mp("no header", "Add one."))
    assert ledger.model.outcome["halt_token"] is None


def test_an_ended_run_carries_its_note_and_no_diagnosis(ws):
    _, ledger = ended_run(
        ws,
        EventLog(ws.events_file),
        status="CANCELLED",
        mp_id="MP-5.6",
        title="T",
        data=MP,
        sha256="s",
        note="Not run.",
    )
    assert ledger.model.outcome["notes"] == ["Not run."] and ledger.model.outcome["diagnosis"] is None


def test_a_superseded_run_says_why_and_emits_it(ws):
    log = EventLog(ws.events_file)
    run, ledger = superseded_run(
        ws, log, mp_id="MP-5.7", title="T", data=MP, sha256="s", why="replaced", source="queue:1"
    )
    assert ledger.model.outcome["status"] == "SUPERSEDED" and ledger.model.source == "queue:1"
    assert "replaced" in ledger.model.outcome["notes"][0]
    assert '"mp_superseded"' in ws.events_file.read_text()


def test_an_error_run_without_an_mp_id_is_approved_by_its_run_id(ws):
    run, ledger = error_run(ws, EventLog(ws.events_file), mp_id=None, diagnosis=PROBLEM)
    assert ledger.model.outcome["halt_token"] == run.run_id and ledger.model.outcome["mp_id"] == "UNPARSED"


def test_record_error_run_into_an_open_run_keeps_its_identity(ws):
    run, ledger = create_run(ws, mp_id="MP-5.4", data=MP, mp_sha256="abc", executor="shell")
    same, failed = error_run(ws, EventLog(ws.events_file), mp_id="MP-5.4", diagnosis=PROBLEM, into=run)
    assert same == run and failed.model.outcome["mp_sha256"] == "abc"
    assert failed.model.outcome["started_at"] == ledger.model.created_at
