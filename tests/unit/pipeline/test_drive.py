"""Driving a claimed run: the budget, and the outcome of each way an executor can end.

The executors here are stand-ins at the executor seam (`Executor` is a protocol: shell
and agent are the real ones, tested in tests/unit/execute and tests/unit/agent)."""

from __future__ import annotations

import pytest

from mp_engine.config.load import load_config
from mp_engine.execute.base import ExecResult
from mp_engine.inbox.mpfile import parse
from mp_engine.pipeline.claim import claim
from mp_engine.pipeline.drive import budget, drive
from mp_engine.pipeline.engine import Engine
from mp_engine.record.ledger import write_artifact
from tests.conftest import events, read_state, result_field

MP = b"# MP-6.1 Driven\nTimeout: 90\n\n```bash\ntrue\n```\n"


class Ends:
    """An executor that ends the way it is told to (or raises)."""

    name = "stand-in"

    def __init__(self, result: ExecResult | Exception):
        self.result = result

    def validate(self, mp) -> None:
        pass

    def time_budget(self, config) -> tuple[float, str]:
        return config.execution.mp_timeout, "mp_timeout"

    def settings(self, config, mp):
        return config

    def run(self, ctx) -> ExecResult:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.fixture
def engine(ws) -> Engine:
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def claimed(engine, data: bytes = MP):
    mp = parse(data)
    run, ledger = claim(engine.ctx, mp, data, "stand-in")
    return mp, run, ledger


def test_the_budget_is_the_mps_timeout_less_what_finished_steps_used(engine):
    mp, run, ledger = claimed(engine)
    step = ledger.ensure_step("step-001", "command", "k")
    ledger.start(step)
    write_artifact(run.steps_dir, step, {"ok": True, "duration": 12.5})
    ledger.finish(step, ok=True, output_ref=None)
    b = budget(engine.ctx.config, mp, run, ledger, engine.executors["shell"])
    assert (b.total, b.source, b.used) == (90.0, "Timeout", 12.5)
    mp2, run2, ledger2 = claimed(engine, b"# MP-6.2\n```bash\ntrue\n```\n")
    assert budget(engine.ctx.config, mp2, run2, ledger2, engine.executors["shell"]).source == "mp_timeout"
    agent = budget(engine.ctx.config, mp2, run2, ledger2, engine.executors["agent"])  # one rule, the executor's default
    assert (agent.total, agent.source) == (engine.config.agent.wall_budget, "wall_budget")
    assert agent.describe == "`[agent] wall_budget`"


def test_an_executor_that_crashes_still_ends_in_one_error_result(engine, ws):
    mp, run, ledger = claimed(engine)
    result = drive(engine.ctx, run, ledger, mp, Ends(RuntimeError("a bug")))
    assert result.action == "error"
    assert result_field(ws, "Error-Kind") == "engine_error" and read_state(ws)["halt"]["mp_id"] == "MP-6.1"


def test_waiting_keeps_the_run_open_with_its_resume_time(engine, ws):
    mp, run, ledger = claimed(engine)
    waiting = {"kind": "usage_limit", "reason": "session limit", "resume_at": "2099-01-01T00:00:00Z"}
    result = drive(engine.ctx, run, ledger, mp, Ends(ExecResult(status="waiting", extra={"waiting": waiting})))
    assert result.action == "waiting" and result.run_id == run.run_id
    state = read_state(ws)
    assert state["status"] == "RUNNING" and state["waiting"]["resume_at"] == "2099-01-01T00:00:00Z"
    assert events(ws, "mp_waiting")[-1]["kind"] == "usage_limit"


def test_an_interrupted_run_is_checkpointed_not_finished(engine, ws):
    mp, run, ledger = claimed(engine)
    ledger.ensure_step("step-001", "command", "k")
    result = drive(engine.ctx, run, ledger, mp, Ends(ExecResult(status="interrupted")))
    assert result.action == "interrupted" and run.ledger().model.status == "open"
    assert events(ws, "mp_checkpointed")[-1]["resume_point"] == "step-001"


def test_completed_is_finalized_with_the_duration(engine, ws):
    mp, run, ledger = claimed(engine)
    result = drive(engine.ctx, run, ledger, mp, Ends(ExecResult(status="completed")))
    assert result.action == "completed" and read_state(ws)["last_completed"] == "MP-6.1"
    assert float(result_field(ws, "Duration").split()[0]) >= 0
