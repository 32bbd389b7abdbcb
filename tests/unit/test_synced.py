"""What a sync point brought (mp_engine/synced.py): pulled files complete, a sync problem
as an ERROR result of its own, and the sync point a finalize ends with answered."""

from __future__ import annotations

import pytest

from mp_engine.config import load_config
from mp_engine.context import Action, TickResult
from mp_engine.engine import Engine
from mp_engine.record.diagnosis import Diagnosis
from mp_engine.sync.pull import SyncOutcome
from mp_engine.synced import after_sync, settle
from tests.conftest import events, read_state, result_field

PROBLEM = Diagnosis("git_conflict", "git conflict with the remote", "Both sides changed X.", "Revert X.")


@pytest.fixture
def engine(ws) -> Engine:
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def test_after_sync_turns_a_sync_problem_into_an_error_result_naming_the_last_mp(ws, engine):
    engine.state.update(last_result={"mp_id": "MP-5.0", "status": "COMPLETED", "run_id": "r", "finished_at": "x"})
    assert after_sync(engine.ctx, SyncOutcome(integrated=True)) is None
    result = after_sync(engine.ctx, SyncOutcome(problem=PROBLEM))
    assert result.action == "error" and result.mp_id == "MP-5.0" and result.sync is None
    assert events(ws, "sync_blocked")[-1]["kind"] == "git_conflict"
    assert result_field(ws, "Status") == "ERROR" and read_state(ws)["halt"]["mp_id"] == "MP-5.0"


def test_settle_keeps_the_pass_s_result_unless_its_sync_point_brought_a_problem(ws, engine):
    done = TickResult(Action.COMPLETED, mp_id="MP-5.1", run_id="r1", sync=SyncOutcome())
    assert settle(engine.ctx, done) == TickResult(Action.COMPLETED, mp_id="MP-5.1", run_id="r1")
    troubled = TickResult(Action.COMPLETED, mp_id="MP-5.1", run_id="r1", sync=SyncOutcome(problem=PROBLEM))
    after = settle(engine.ctx, troubled)
    assert after.action == "error" and after.run_id != "r1"  # the sync problem's own run
    assert result_field(ws, "Error-Kind") == "git_conflict"
