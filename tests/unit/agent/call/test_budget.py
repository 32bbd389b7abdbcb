"""The budgets across every MP (mp_engine/agent/call/budget.py, issue #42): a call refused
once a budget is spent or when its prompt alone would cross it, one alert per period, each
call charged once; and through `Engine.tick()`, an MP that waits for the reset (or ends),
keeps its spend over a restart, and starts by itself after the reset."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from mp_engine.agent.call.budget import Spending
from mp_engine.agent.call.invoke import Call, CallKind
from mp_engine.config.agent import AgentConfig, AgentLevel, ModelPrice
from mp_engine.config.load import load_config
from mp_engine.pipeline.engine import Engine
from mp_engine.record.spend import SPEND_FILE, SpendLog
from tests.agentutil import GREET, calls, configure, level, only_run, records
from tests.conftest import drop, events, read_state, result_field

LEVEL = AgentLevel(name="codex", argv=["codex", "-"], stdin=True)
NOW = datetime(2026, 4, 5, 10, 0, tzinfo=UTC).timestamp()


def spending(tmp_path, seen: list | None = None, **cfg) -> Spending:
    config = AgentConfig(budget_clock="UTC", **cfg)
    emit = (lambda name, **f: seen.append((name, f))) if seen is not None else None
    return Spending.at(tmp_path, config, mp_id="MP-1", emit=emit)


def test_without_budgets_every_call_may_be_made(tmp_path):
    s = spending(tmp_path)
    s.log.charge("a", 1000.0, mp="MP-0", at=NOW)
    assert s.refusal(LEVEL, "prompt", NOW) is None


def test_a_spent_budget_refuses_until_its_reset_and_alerts_once(tmp_path):
    seen: list = []
    s = spending(tmp_path, seen, daily_cost_usd=1.0, monthly_cost_usd=10.0)
    s.log.charge("a", 0.99, mp="MP-0", at=NOW)
    assert s.refusal(LEVEL, "prompt", NOW) is None  # under the budget, the prompt unpriced
    s.log.charge("b", 0.02, mp="MP-0", at=NOW)
    refused = s.refusal(LEVEL, "prompt", NOW)
    assert refused is not None and refused.kind is CallKind.BUDGET and refused.pauses
    assert refused.resume_at == "2026-04-06T00:00:00Z"
    assert "$1.0100 today (2026-04-05)" in refused.detail and "(`[agent] daily_cost_usd`) is $1;" in refused.detail
    assert spending(tmp_path, seen, daily_cost_usd=1.0).refusal(LEVEL, "p", NOW + 60) is not None  # a restart
    assert [n for n, _ in seen] == ["budget_spent"] and seen[0][1]["period"] == "day"
    tomorrow = NOW + 86400
    assert s.refusal(LEVEL, "prompt", tomorrow) is None
    s.log.charge("c", 9.0, mp="MP-0", at=tomorrow)
    month = s.refusal(LEVEL, "prompt", tomorrow)  # both spent: the later reset decides
    assert month is not None and month.resume_at == "2026-05-01T00:00:00Z"
    assert [f["period"] for _, f in seen] == ["day", "month"]


def test_a_prompt_that_alone_would_cross_what_is_left_is_not_sent(tmp_path):
    s = spending(tmp_path, daily_cost_usd=1.0, prices={"codex": ModelPrice(input=100.0, output=0.0)})
    s.log.charge("a", 0.5, mp="MP-0", at=NOW)
    assert s.refusal(LEVEL, "x" * 4000, NOW) is None  # 1,000 tokens: $0.10
    refused = s.refusal(LEVEL, "x" * 40000, NOW)  # 10,000 tokens: $1.00, over the $0.50 left
    assert refused is not None and "prompt alone would cost about $1.0000" in refused.detail


def test_a_call_is_priced_and_charged_once(tmp_path):
    s = spending(tmp_path, daily_cost_usd=5.0, prices={"codex": ModelPrice(input=1.0, output=2.0)})
    call = Call(CallKind.OK, usage={"input": 1_000_000, "output": 500_000, "cache_read": 0, "cache_write": 0})
    s.charge("run/k", call, LEVEL, now=NOW)
    s.charge("run/k", call, LEVEL, now=NOW)
    assert call.usage is not None and call.usage["cost_usd"] == 2.0 and call.usage["priced"] == "table"
    assert s.summary(NOW)["day"]["spent_usd"] == 2.0
    s.charge("run/k2", Call(CallKind.BUDGET, detail="refused"), LEVEL, now=NOW)  # never made: not charged
    assert len(SpendLog(tmp_path / SPEND_FILE).path.read_text().splitlines()) == 1


# -- through Engine.tick() ----------------------------------------------------------------


def engine(ws, levels, prices: str = "", **opts) -> Engine:
    configure(ws, levels, budget_clock="UTC", **opts)
    if prices:
        with ws.config_file.open("a") as f:
            f.write(prices)
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def next_midnight() -> str:
    day = datetime.now(UTC).date() + timedelta(days=1)
    return f"{day.isoformat()}T00:00:00Z"


def back_a_day(ws) -> None:
    """As if the spend so far were yesterday's: the day's budget has reset."""
    path = ws.local_dir / SPEND_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "at": r["at"] - 86400}) + "\n" for r in lines))


def test_an_mp_past_the_daily_budget_waits_for_the_reset_then_starts_by_itself(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    log = tmp_path / "calls.log"
    eng = engine(ws, [level("paid", "good.py", "--cost", "0.6", "--log", str(log))], daily_cost_usd=0.5)
    drop(ws, GREET)
    res = eng.tick()
    assert res.action == "waiting", ws.result_file.read_text() if ws.result_file.exists() else res
    assert len(calls(log)) == 1  # MT-001 spent $0.60; MT-002's call was never made
    waiting = read_state(ws)["waiting"]
    assert waiting["kind"] == "budget" and waiting["resume_at"] == next_midnight()
    assert "(`[agent] daily_cost_usd`) is $0.5" in waiting["reason"]
    spent = [e for e in events(ws) if e["event"] == "budget_spent"]
    assert len(spent) == 1 and spent[0]["period"] == "day" and spent[0]["spent_usd"] == 0.6
    # A restart keeps the spend: a new engine (the run re-entered past its wait) is refused
    # again, without a second alert.
    eng.shutdown()
    state = json.loads(ws.state_file.read_text())
    state["waiting"]["resume_at"] = "2000-01-01T00:00:00Z"
    ws.state_file.write_text(json.dumps(state))
    again = Engine(ws, load_config(ws.root))
    again.start(daemon=False)
    assert again.tick().action == "waiting" and len(calls(log)) == 1
    assert len([e for e in events(ws) if e["event"] == "budget_spent"]) == 1
    # The next day: it starts by itself.
    back_a_day(ws)
    state = json.loads(ws.state_file.read_text())
    state["waiting"]["resume_at"] = "2000-01-01T00:00:00Z"
    ws.state_file.write_text(json.dumps(state))
    assert again.tick().action == "completed", ws.result_file.read_text()
    assert [r["mt"] for r in records(only_run(ws))] == ["MT-001", "MT-002"] and len(calls(log)) == 2
    result = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert result["budget"]["day"]["spent_usd"] == 0.6 and result["budget"]["day"]["limit_usd"] == 0.5
    assert result["usage"]["cost_usd"] == 1.2


def test_on_budget_end_ends_the_mp_backpressure(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    eng = engine(ws, [level("paid", "good.py", "--cost", "0.6")], daily_cost_usd=0.5, on_budget="end")
    drop(ws, GREET)
    assert eng.tick().action == "error"
    assert result_field(ws, "Certificate") == "BACKPRESSURE" and result_field(ws, "Error-Kind") == "agent_budget"
    assert "resets at" in ws.result_file.read_text()


def test_tokens_priced_from_the_table_count_and_a_prompt_over_what_is_left_is_never_sent(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    log = tmp_path / "calls.log"
    prices = '\n[agent.prices."tok"]\ninput = 100.0\noutput = 1000.0\n'
    eng = engine(ws, [level("tok", "good.py", "--tokens", "2000", "--log", str(log))], prices, daily_cost_usd=0.25)
    drop(ws, GREET)
    assert eng.tick().action == "waiting"
    (first,) = records(only_run(ws))
    usage = first["call"]["usage"]
    assert usage["priced"] == "table" and usage["cost_usd"] == round((2000 * 100 + 30 * 1000) / 1e6, 6)
    # $0.23 spent of $0.25: MT-002's prompt (hundreds of tokens at $100 per million) would cross it.
    prompt = (only_run(ws).dir / first["evidence"] / "prompt.md").read_text()
    assert len(prompt) > 1000 and len(calls(log)) == 1
    assert "prompt alone would cost" in read_state(ws)["waiting"]["reason"]


def test_a_restart_at_any_point_of_a_call_keeps_its_charge_once(ws, tmp_path):
    """After the call and its record (call.json) but before its charge, or after both: the
    replayed call is charged once; the call itself is not made again."""
    from dataclasses import replace

    from mp_engine.agent.call.caller import Caller
    from mp_engine.agent.evidence import IterationEvidence
    from tests.agentutil import ONE, agent_context, run_scope

    log = tmp_path / "calls.log"
    ctx = agent_context(ws, ONE, [level("paid", "good.py", "--cost", "0.4", "--log", str(log))], daily_cost_usd=5.0)
    scope = run_scope(ctx)
    scope = replace(scope, spending=Spending.at(ws.local_dir, scope.cfg, mp_id="MP-3.2"))
    ev = IterationEvidence(ctx.run.dir, "MT-001", 1)
    ev.write("prompt.md", '## Your micro-task now: MT-001\n\nWrite "hello" to `out/a.txt`.\n\n## Checks\n')
    lv = scope.cfg.levels[0]

    def call():
        return Caller(scope, ws.root).call(lv, ev, key="k1", mt_id="MT-001", iteration=1, level_index=0, on_spawn=id)

    spend = ws.local_dir / SPEND_FILE
    assert call().usage["cost_usd"] == 0.4 and len(spend.read_text().splitlines()) == 1
    spend.unlink()  # a crash between the call's record and its charge
    assert call().kind == "ok" and len(spend.read_text().splitlines()) == 1
    assert call().kind == "ok" and len(spend.read_text().splitlines()) == 1  # charged once, whatever replays
    assert len(calls(log)) == 1
