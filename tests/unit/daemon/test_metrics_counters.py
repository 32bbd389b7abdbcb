"""The Prometheus counters are fed by the event log, so they count what it records."""

from __future__ import annotations

import math

import pytest

from mp_engine.config.load import load_config
from mp_engine.daemon.metrics import Metrics
from mp_engine.pipeline.engine import Engine
from mp_engine.record.state import Halt


@pytest.fixture
def metrics(ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_METRICS__LISTEN", "127.0.0.1:0")
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    m = Metrics(engine, engine.config, last_sync_ok=lambda: None)
    engine.events.listeners.append(m.on_event)
    return engine, m


def value(m: Metrics, name: str, labels: dict | None = None) -> float | None:
    return m.registry.get_sample_value(name, labels or {})


def test_finished_mps_and_steps_are_counted_by_status(metrics):
    engine, m = metrics
    engine.events.emit("mp_claimed", mp="MP-1.0", run="r1")
    engine.events.emit("step_finished", mp="MP-1.0", run="r1", step="step-001", ok=True, duration=0.2)
    engine.events.emit("mp_completed", mp="MP-1.0", run="r1", duration=1.5)
    engine.events.emit("mp_failed", mp="MP-1.1", run="r-missing", kind="timeout", summary="s", fix="f")
    assert value(m, "mp_engine_mps_total", {"status": "COMPLETED"}) == 1
    assert value(m, "mp_engine_mps_total", {"status": "ERROR"}) == 1
    assert value(m, "mp_engine_step_duration_seconds_count") == 1
    assert value(m, "mp_engine_mp_duration_seconds_sum", {"status": "COMPLETED"}) == 1.5


def test_sync_failures_halted_and_the_last_sync(metrics):
    engine, m = metrics
    engine.events.emit("sync_unreachable", remote="origin", error="down")
    assert value(m, "mp_engine_sync_failures_total", {"event": "sync_unreachable"}) == 1
    assert value(m, "mp_engine_sync_failures_total", {"event": "sync_conflict"}) == 0  # exported from the start
    assert value(m, "mp_engine_halted") == 0
    engine.state.update(halt=Halt(mp_id="MP-1.1", run_id="r", reason="x", since="2026-01-01T00:00:00.000Z"))
    assert value(m, "mp_engine_halted") == 1
    assert math.isnan(value(m, "mp_engine_seconds_since_last_sync"))


def test_served_over_http_on_loopback_and_closed(metrics):
    from tests.serviceutil import scrape

    engine, m = metrics
    host, port = m.serve()
    try:
        engine.events.emit("mp_completed", mp="MP-1.0", run="r1", duration=0.5)
        samples = scrape(f"{host}:{port}")
        assert host == "127.0.0.1" and samples['mp_engine_mps_total{status="COMPLETED"}'] == 1.0
    finally:
        m.close()


def test_agent_tokens_and_dollars_are_counted_by_level(metrics):
    engine, m = metrics
    used = {"input": 1200, "output": 80, "cache_read": 500, "cache_write": 0, "cost_usd": 0.0123}
    for _ in range(2):
        engine.events.emit("micro_task_iteration_complete", mp="MP-1.0", mt="MT-001", level_name="claude", usage=used)
    engine.events.emit("micro_task_iteration_complete", mp="MP-1.0", mt="MT-001", level_name="local", usage=None)
    assert value(m, "mp_engine_agent_tokens_total", {"level": "claude", "kind": "input"}) == 2400
    assert value(m, "mp_engine_agent_tokens_total", {"level": "claude", "kind": "cache_read"}) == 1000
    assert value(m, "mp_engine_agent_tokens_total", {"level": "claude", "kind": "cache_write"}) is None  # none reported
    assert value(m, "mp_engine_agent_cost_usd_total", {"level": "claude"}) == pytest.approx(0.0246)
    assert value(m, "mp_engine_agent_tokens_total", {"level": "local", "kind": "input"}) is None


def test_the_budget_left_of_each_period_is_read_from_the_spend_log(ws, monkeypatch):
    """Issue #42: `mp_engine_budget_remaining_usd{period}` for each budget set, every MP's
    and every fleet worker's calls together (the one spend log)."""
    from mp_engine.record.spend import SPEND_FILE, SpendLog

    monkeypatch.setenv("MP_ENGINE_AGENT__DAILY_COST_USD", "5")
    engine = Engine(ws, load_config(ws.root))
    m = Metrics(engine, engine.config, last_sync_ok=lambda: None)
    assert value(m, "mp_engine_budget_remaining_usd", {"period": "day"}) == 5.0
    assert value(m, "mp_engine_budget_remaining_usd", {"period": "month"}) is None  # no monthly budget
    SpendLog(ws.local_dir / SPEND_FILE).charge("run/k", 1.25, mp="MP-1")
    assert value(m, "mp_engine_budget_remaining_usd", {"period": "day"}) == 3.75
