"""What the agent calls cost (mp_engine/agent/usage.py, issue #32), through `Engine.tick()`
with fake agents that print aider's token and cost line: summed per task, per level and for
the MP into the result; `[agent] max_cost_usd` ends the MP like the wall budget."""

from __future__ import annotations

import json

from mp_engine.agent.call.usage import Usage
from mp_engine.agent.progress import render_lines
from tests.agentutil import GREET, ONE, level, only_run, records
from tests.conftest import drop, result_field


def test_usage_is_summed_per_task_and_level_into_the_result(engine_for, ws):
    engine = engine_for([level("cheap", "good.py", "--cost", "0.01")])
    drop(ws, GREET)
    assert engine.tick().action == "completed"
    run = only_run(ws)
    assert [r["call"]["usage"]["input"] for r in records(run)] == [1200, 1200]
    used = json.loads(run.result_json.read_text())["usage"]
    assert (used["input"], used["output"], used["cost_usd"], used["calls"], used["priced"]) == (2400, 60, 0.02, 2, 2)
    assert used["by_level"]["cheap"]["calls"] == 2 and set(used["by_task"]) == {"MT-001", "MT-002"}
    assert json.loads((ws.root / "SYSTEM" / "RESULT_last.json").read_text())["usage"]["cost_usd"] == 0.02
    assert "Agent usage: 2400 input and 60 output tokens in 2 calls, $0.0200" in ws.result_file.read_text()
    # `status` says the same of a live run (its progress snapshot holds the same sums).
    lines = render_lines({"current": {}, "status": "in_progress", "usage": used}, None)
    assert "  agent usage:     2400 input and 60 output tokens in 2 calls, $0.0200" in lines


def test_the_cost_budget_ends_the_mp_like_the_wall_budget(engine_for, ws):
    engine = engine_for([level("pricey", "wrong.py", "--cost", "0.01")], max_cost_usd=0.015, fail_threshold=10)
    drop(ws, ONE)
    assert engine.tick().action == "error"
    cert = json.loads((only_run(ws).dir / "agent" / "certificate.json").read_text())
    assert (cert["type"], cert["reason"]) == ("TIMEOUT", "cost_budget") and "$0.0200" in cert["detail"]
    assert len(records(only_run(ws))) == 2 and result_field(ws, "Status") == "ERROR"


def test_calls_without_a_price_count_tokens_only():
    u = Usage()
    u.add({"call": {"usage": {"input": 10, "output": 2, "cost_usd": None}}}, task="MT-001", level="local")
    u.add({"call": {"usage": {"input": 5, "output": 1, "cost_usd": 0.5}}}, task="MT-001", level="api")
    u.add({"call": {"kind": "ok"}}, task="MT-002", level="local")  # a CLI that said nothing
    assert (u.total["input"], u.total["calls"], u.total["priced"], u.cost) == (15, 2, 1, 0.5)
    assert u.line() == "15 input and 3 output tokens in 2 calls, $0.5000 (1 of 2 calls priced)"
