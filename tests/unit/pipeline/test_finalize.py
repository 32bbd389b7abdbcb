"""Finalize: one result, the inbox cleared without losing a newer MP, the state, idempotent."""

from __future__ import annotations

import hashlib

from mp_engine.pipeline.finalize import finalize
from mp_engine.record.archive import create_run
from mp_engine.record.diagnosis import Diagnosis
from mp_engine.record.outcome import Outcome
from mp_engine.record.unrun import error_run
from tests.conftest import events, read_state, result_field

MP = b"# MP-5.1 Done\n\n```bash\ntrue\n```\n"
PROBLEM = Diagnosis("git_conflict", "git conflict with the remote", "Both sides changed X.", "Revert X.")


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


def test_an_error_run_halts_with_its_token(ws, engine):
    run, ledger = error_run(ws, engine.events, mp_id="MP-5.3", diagnosis=PROBLEM)
    result = finalize(engine.ctx, run, ledger)
    assert result.action == "error"
    state = read_state(ws)
    assert state["status"] == "ERROR" and state["halt"]["mp_id"] == "MP-5.3"
    assert events(ws, "halted")[-1]["approve_with"] == "Approves: MP-5.3"
