"""What a sync point brought (mp_engine/synced.py): pulled files complete, a sync problem
as an ERROR result of its own, and the sync point a finalize ends with answered."""

from __future__ import annotations

from mp_engine.config.load import load_config
from mp_engine.pipeline.engine import Engine
from mp_engine.pipeline.synced import after_sync, prune_runs
from mp_engine.record.diagnosis import Diagnosis
from mp_engine.sync.pull import SyncOutcome
from tests.conftest import drop, events, read_state, result_field

PROBLEM = Diagnosis("git_conflict", "git conflict with the remote", "Both sides changed X.", "Revert X.")


def test_after_sync_turns_a_sync_problem_into_an_error_result_naming_the_last_mp(ws, engine):
    engine.state.update(last_result={"mp_id": "MP-5.0", "status": "COMPLETED", "run_id": "r", "finished_at": "x"})
    assert after_sync(engine.ctx, SyncOutcome(integrated=True)) is None
    result = after_sync(engine.ctx, SyncOutcome(problem=PROBLEM))
    assert result.action == "error" and result.mp_id == "MP-5.0" and result.sync is None
    assert events(ws, "sync_blocked")[-1]["kind"] == "git_conflict"
    assert result_field(ws, "Status") == "ERROR" and read_state(ws)["halt"]["mp_id"] == "MP-5.0"


def test_no_sync_point_or_one_without_a_problem_needs_no_answer(ws, engine):
    assert after_sync(engine.ctx, None) is None
    assert after_sync(engine.ctx, SyncOutcome(integrated=True)) is None
    assert not events(ws, "sync_blocked")


def test_old_runs_are_pruned_after_a_run_ended(ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ARCHIVE__KEEP_RUNS", "2")
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    for n in range(4):
        drop(ws, f"# MP-5.{n}\n\n```bash\ntrue\n```\n")
        assert engine.tick().action == "completed"
    assert len([p for p in ws.runs_dir.iterdir() if p.is_dir()]) == 2
    assert sum(e["count"] for e in events(ws, "runs_pruned")) == 2
    assert prune_runs(engine.ctx) is None  # nothing left to prune
