"""The run ledger: every transition persisted, recovery settled from artifacts."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from mp_engine.record import journal
from mp_engine.record.ledger import Ledger, StepStatus, idempotency_key, read_artifact, write_artifact
from tests.conftest import fsynced


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger.create(tmp_path / "ledger.json", run_id="r1", mp_id="MP-1.0", mp_sha256="ab" * 32, executor="shell")


def on_disk(ledger: Ledger) -> dict:
    """The ledger as a reader finds it: ledger.json with its journal applied."""
    return journal.read(ledger.path)


def test_create_writes_a_ledger_that_loads_back(ledger):
    again = Ledger.load(ledger.path)
    assert again.model == ledger.model
    assert on_disk(ledger)["status"] == "open" and on_disk(ledger)["steps"] == []


def test_a_pending_step_is_not_written_until_it_starts(ledger):
    step = ledger.ensure_step("step-001", "command", "k1")
    assert ledger.ensure_step("step-001", "command", "other") is step  # idempotent by id
    assert on_disk(ledger)["steps"] == []
    ledger.start(step)
    written = on_disk(ledger)["steps"][0]
    assert written["status"] == "in_progress" and written["attempts"] == 1


def test_finish_records_the_outcome_and_forgets_the_process_group(ledger):
    step = ledger.ensure_step("step-001", "command", "k1")
    ledger.start(step)
    ledger.spawned(step, 4242, 99)
    assert on_disk(ledger)["steps"][0]["pgid"] == 4242
    ledger.finish(step, ok=False, output_ref="step-001.exit.json", error="exit 3")
    written = on_disk(ledger)["steps"][0]
    assert (written["status"], written["error"], written["pgid"]) == ("failed", "exit 3", None)


def test_deferred_mode_writes_only_when_a_process_is_spawned_or_saved(ledger):
    ledger.deferred = True
    step = ledger.ensure_step("MT-001_iter-001", "agent", "k")
    ledger.start(step)
    assert on_disk(ledger)["steps"] == []
    ledger.spawned(step, 77, None)  # recovery must be able to kill it: written at once
    assert on_disk(ledger)["steps"][0]["pgid"] == 77
    ledger.finish(step, ok=True, output_ref=None)
    assert on_disk(ledger)["steps"][0]["status"] == "in_progress"
    ledger.save(durable=True)
    assert on_disk(ledger)["steps"][0]["status"] == "completed"


def test_recover_settles_from_artifacts_and_retries_the_rest(ledger, tmp_path):
    steps_dir = tmp_path / "steps"
    steps_dir.mkdir()
    done, cut, spawned = (ledger.ensure_step(f"step-00{i}", "command", f"k{i}") for i in (1, 2, 3))
    for s in (done, cut, spawned):
        ledger.start(s)
    ledger.spawned(spawned, 555, 12)
    write_artifact(steps_dir, done, {"ok": True})  # the step finished; the ledger never heard
    rec = Ledger.load(ledger.path).recover(steps_dir, reason="test crash")
    assert rec.steps_recovered == ["step-001"]
    assert rec.steps_to_retry == ["step-002", "step-003"]
    assert rec.stale_groups == [(555, 12)] and rec.unrecorded == ["step-001", "step-002"]
    assert rec.resume_point == "step-002"
    data = on_disk(ledger)
    assert [s["status"] for s in data["steps"]] == ["completed", "pending", "pending"]
    assert data["steps"][1]["interrupted"] is True and data["recoveries"][0]["reason"] == "test crash"


def test_an_artifact_of_another_attempt_is_not_taken_for_this_one(ledger, tmp_path):
    step = ledger.ensure_step("step-001", "command", "old-key")
    write_artifact(tmp_path, step, {"ok": True})
    step.idempotency_key = "new-key"
    assert read_artifact(tmp_path, step) is None


def test_outcome_then_close(ledger):
    ledger.set_outcome({"status": "COMPLETED"})
    assert on_disk(ledger)["status"] == "finishing"
    ledger.close()
    assert on_disk(ledger)["status"] == "closed" and on_disk(ledger)["outcome"] == {"status": "COMPLETED"}


def test_idempotency_key_separates_its_parts():
    assert idempotency_key("a", "bc") != idempotency_key("ab", "c")
    assert len(idempotency_key("x")) == 64


def test_a_ledger_with_wrong_fields_does_not_load(tmp_path):
    bad = tmp_path / "ledger.json"
    bad.write_text(json.dumps({"run_id": 3}))
    with pytest.raises(ValidationError):
        Ledger.load(bad)
    assert StepStatus("pending") is StepStatus.PENDING


def test_deferred_transitions_are_flushed_as_journal_lines_with_one_fsync(ledger, monkeypatch):
    """The agent loop's checkpoint: no rewrite of ledger.json, one fsync of the journal
    (and of its directory the first time in a generation)."""
    ledger.durable, ledger.deferred = False, True
    before = ledger.path.read_bytes()
    fsyncs = fsynced(monkeypatch)
    for i in (1, 2):
        step = ledger.ensure_step(f"MT-00{i}_iter-001", "agent", "k")
        ledger.start(step)
        ledger.spawned(step, 70 + i, None)
        ledger.finish(step, ok=True, output_ref="x")
        ledger.flush(durable=True)
        assert on_disk(ledger)["steps"][i - 1]["status"] == "completed"
    assert ledger.path.read_bytes() == before  # journal lines only
    jpath, folder = str(journal.journal_path(ledger.path)), str(ledger.path.parent)
    assert fsyncs == [jpath, folder, jpath]  # the journal twice, its directory once
    ledger.flush(durable=True)  # nothing deferred: the journal is fsynced, nothing is written
    assert fsyncs[3:] == [jpath] and len(journal.journal_path(ledger.path).read_text().splitlines()) == 4


def test_a_checkpoint_makes_a_rewrite_that_skipped_fsync_durable(ledger, monkeypatch):
    """A rewrite of ledger.json without fsync (a step released, the journal folded) in the
    agent loop's batch mode: the next checkpoint fsyncs its content and the directory,
    or a power loss could leave the renamed file empty while the journal's lines of its
    generation survive."""
    ledger.durable, ledger.deferred = False, True
    step = ledger.ensure_step("MT-001_iter-001", "agent", "k")
    ledger.start(step)
    fsyncs = fsynced(monkeypatch)
    ledger.save()  # as `AgentSteps.release` does in batch mode: not fsynced
    assert fsyncs == []
    ledger.flush(durable=True)  # nothing deferred since, no journal: the rewrite itself
    assert fsyncs == [str(ledger.path), str(ledger.path.parent)]
    ledger.flush(durable=True)  # synced already: nothing more
    assert len(fsyncs) == 2
    ledger.save()
    ledger.start(ledger.ensure_step("MT-002_iter-001", "agent", "k2"))  # deferred
    ledger.flush(durable=True)  # the new generation's journal, then the rewrite before it
    assert fsyncs[2:] == [str(journal.journal_path(ledger.path)), str(ledger.path), str(ledger.path.parent)]
    assert [s["status"] for s in Ledger.load(ledger.path).model.model_dump()["steps"]] == ["in_progress"] * 2


def test_the_close_fsyncs_the_ledgers_content_before_its_rename(ledger, monkeypatch):
    """Closing: never a torn ledger after a power loss (it would count as an unfilled run);
    the rename may be undone (finalizing is done again), so the directory is not fsynced."""
    calls = fsynced(monkeypatch)
    ledger.close()
    assert len(calls) == 1 and ".ledger.json.mpe-tmp-" in calls[0]
    assert on_disk(ledger)["status"] == "closed"


def test_a_runs_journal_is_durable_with_the_run_so_a_step_start_is_one_fsync(ws, monkeypatch):
    from mp_engine.record.archive import create_run

    run, ledger = create_run(ws, mp_id="MP-1.0", data=b"# MP-1.0\n", mp_sha256="ab" * 32, executor="shell")
    calls = fsynced(monkeypatch)
    ledger.start(ledger.ensure_step("step-001", "command", "k1"))
    assert calls == [str(journal.journal_path(ledger.path))]
    assert on_disk(ledger)["steps"][0]["status"] == "in_progress"
