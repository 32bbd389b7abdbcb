"""Review rounds recorded in a run (mp_engine/agent/run/reviews.py): numbered, durable, and
each made one ledger step on the run's way back in, once."""

from __future__ import annotations

from mp_engine.agent.run import reviews
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.record.ledger import Ledger
from tests.unit.agent.state.test_ci import passed


def test_each_round_recorded_is_taken_once_as_a_ledger_step(tmp_path):
    assert reviews.received(tmp_path) == []
    assert reviews.add(tmp_path, number=1, url="u", keys=["comment:1"], authors=["alice"], text="x") == 1
    assert reviews.add(tmp_path, number=1, url="u", keys=["comment:2"], authors=["bob"], text="y") == 2
    ledger = Ledger.create(tmp_path / "ledger.json", run_id="r", mp_id="MP-1", mp_sha256="0", executor="agent")
    (tmp_path / "steps").mkdir()
    steps = AgentSteps(ledger, tmp_path / "steps")
    s = passed()
    effects = reviews.take(s, steps, tmp_path)
    assert [e.fields["round"] for e in effects] == [1, 2] and len(s.tasks) == 3
    assert [st.step_id for st in ledger.model.steps] == ["PR-REVIEW-1", "PR-REVIEW-2"]
    assert reviews.take(s, steps, tmp_path) == []  # once
