"""Finalize: one result, the inbox cleared without losing a newer MP, the state, idempotent."""

from __future__ import annotations

import hashlib

import pytest

from mp_engine.config import load_config
from mp_engine.engine import Engine
from mp_engine.finalize import after_sync, clear_inbox, finalize, record_error_run
from mp_engine.inbox.intake import CLAIMED_PREFIX
from mp_engine.record.archive import create_run
from mp_engine.record.diagnosis import Diagnosis
from mp_engine.record.outcome import Outcome
from mp_engine.sync.pull import SyncOutcome
from tests.conftest import events, read_state, result_field

MP = b"# MP-5.1 Done\n\n```bash\ntrue\n```\n"
PROBLEM = Diagnosis("git_conflict", "git conflict with the remote", "Both sides changed X.", "Revert X.")


@pytest.fixture
def engine(ws) -> Engine:
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def completed_run(ws):
    run, ledger = create_run(ws, mp_id="MP-5.1", data=MP, mp_sha256=hashlib.sha256(MP).hexdigest(), executor="shell")
    ledger.model.inbox_entry = "delete"
    now = "2026-11-24T00:00:00.000Z"
    ledger.set_outcome(
        Outcome(
            status="COMPLETED",
            mp_id="MP-5.1",
            title="Done",
            run_id=run.run_id,
            mp_sha256="",
            started_at=now,
            finished_at=now,
        ).to_dict()
    )
    return run, ledger


def test_finalize_publishes_a_completed_run_and_clears_our_mp(ws, engine):
    ws.inbox_file.write_bytes(MP)
    run, ledger = completed_run(ws)
    result = finalize(engine.ctx, run, ledger)
    assert (result.action, result.mp_id) == ("completed", "MP-5.1")
    assert not ws.inbox_file.exists()
    state = read_state(ws)
    assert (state["status"], state["last_completed"], state["run_id"]) == ("ONLINE", "MP-5.1", None)
    assert result_field(ws, "Status") == "COMPLETED" and run.ledger().model.status == "closed"


def test_finalize_twice_is_one_result(ws, engine):
    ws.inbox_file.write_bytes(MP)
    run, ledger = completed_run(ws)
    finalize(engine.ctx, run, ledger)
    finalize(engine.ctx, run, run.ledger())  # a crash after the first: finished again
    assert read_state(ws)["last_completed"] == "MP-5.1" and run.ledger().model.status == "closed"
    assert run.result_json.exists() and not ws.inbox_file.exists()


def test_a_newer_mp_that_replaced_ours_during_the_run_stays_in_the_inbox(ws, engine):
    newer = b"# MP-5.2 Next\n\n```bash\ntrue\n```\n"
    ws.inbox_file.write_bytes(newer)
    run, ledger = completed_run(ws)
    clear_inbox(engine.ctx, run, ledger)
    assert ws.inbox_file.read_bytes() == newer
    assert not list(ws.inbox_dir.glob(f"{CLAIMED_PREFIX}*"))
    assert events(ws, "inbox_replaced")


def test_a_crash_between_rename_aside_and_delete_is_finished(ws, engine):
    run, ledger = completed_run(ws)
    aside = ws.inbox_dir / f"{CLAIMED_PREFIX}{run.run_id}"
    aside.write_bytes(MP)  # renamed aside, then the engine died
    clear_inbox(engine.ctx, run, ledger)
    assert not aside.exists() and not ws.inbox_file.exists()


def test_an_error_run_halts_with_its_token(ws, engine):
    run, ledger = record_error_run(engine.ctx, mp_id="MP-5.3", diagnosis=PROBLEM)
    result = finalize(engine.ctx, run, ledger)
    assert result.action == "error"
    state = read_state(ws)
    assert state["status"] == "ERROR" and state["halt"]["mp_id"] == "MP-5.3"
    assert events(ws, "halted")[-1]["approve_with"] == "Approves: MP-5.3"


def test_an_error_run_without_an_mp_id_is_approved_by_its_run_id(ws, engine):
    run, ledger = record_error_run(engine.ctx, mp_id=None, diagnosis=PROBLEM)
    assert ledger.model.outcome["halt_token"] == run.run_id and ledger.model.outcome["mp_id"] == "UNPARSED"


def test_record_error_run_into_an_open_run_keeps_its_identity(ws, engine):
    run, ledger = create_run(ws, mp_id="MP-5.4", data=MP, mp_sha256="abc", executor="shell")
    same, failed = record_error_run(engine.ctx, mp_id="MP-5.4", diagnosis=PROBLEM, into=run)
    assert same == run and failed.model.outcome["mp_sha256"] == "abc"
    assert failed.model.outcome["started_at"] == ledger.model.created_at


def test_after_sync_turns_a_sync_problem_into_an_error_result_naming_the_last_mp(ws, engine):
    engine.state.update(last_result={"mp_id": "MP-5.0", "status": "COMPLETED", "run_id": "r", "finished_at": "x"})
    assert after_sync(engine.ctx, SyncOutcome(integrated=True)) is None
    result = after_sync(engine.ctx, SyncOutcome(problem=PROBLEM))
    assert result.action == "error" and result.mp_id == "MP-5.0"
    assert events(ws, "sync_blocked")[-1]["kind"] == "git_conflict"
    assert result_field(ws, "Status") == "ERROR"


def test_two_newer_mps_during_a_run_keep_the_newest_in_the_inbox_and_the_other_in_the_archive(ws, engine):
    run, ledger = completed_run(ws)
    newer = b"# MP-5.2 Newer\n```bash\ntrue\n```\n"
    newest = b"# MP-5.3 Newest\n```bash\ntrue\n```\n"
    aside = ws.inbox_dir / f"{CLAIMED_PREFIX}{run.run_id}"
    aside.write_bytes(newer)  # renamed aside by this finalize, then the engine died...
    ws.inbox_file.write_bytes(newest)  # ...and the orchestrator wrote another one
    clear_inbox(engine.ctx, run, ledger)
    assert ws.inbox_file.read_bytes() == newest and run.moved_entry.read_bytes() == newer
    assert events(ws, "inbox_superseded")[-1]["kept"] == ws.rel(run.moved_entry)
