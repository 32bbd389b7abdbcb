"""The daemon loop around `Engine.tick()`: it survives a failing pass, sleeps until the
nearest timer, and stops on the engine's stop event."""

from __future__ import annotations

import threading
import time

import pytest

from mp_engine.config.load import load_config
from mp_engine.daemon.loop import Daemon
from mp_engine.pipeline.context import TickResult
from mp_engine.pipeline.engine import Engine
from tests.conftest import drop, events, read_state, wait_for


@pytest.fixture
def daemon(ws, monkeypatch) -> Daemon:
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    return Daemon(Engine(ws, load_config(ws.root)))


def test_a_failing_pass_is_logged_and_the_daemon_lives_on(daemon, ws):
    daemon.engine.start(daemon=False)
    ws.state_file.write_text("{torn")
    drop(ws, "# MP-1.0\n\n```bash\ntrue\n```\n")
    result = daemon.safe_tick()
    assert result.action == "failed" and result.wait_until is not None
    assert "not valid JSON" in events(ws, "tick_failed")[-1]["error"]


def test_it_sleeps_until_the_nearest_timer(daemon):
    now = time.monotonic()
    cfg = daemon.engine.config
    assert daemon.sleep_for(TickResult("idle"), now, now + 1000) == pytest.approx(cfg.engine.poll_interval)
    assert daemon.sleep_for(TickResult("waiting", wait_until=now + 0.01), now, now + 1000) == pytest.approx(0.01)
    assert daemon.sleep_for(TickResult("idle"), now, now + 0.02) == pytest.approx(0.02)
    assert daemon.sleep_for(TickResult("busy", wait_until=now), now, now + 1000) >= 0.5  # let the holder work


def test_run_takes_an_mp_and_stops_offline(daemon, ws):
    t = threading.Thread(target=daemon.run, daemon=True)
    t.start()
    drop(ws, "# MP-1.1\n\n```bash\ntrue\n```\n")
    wait_for(lambda: read_state(ws).get("last_completed") == "MP-1.1", what="the MP to complete")
    daemon.engine.stop.set()
    daemon.wake.set()
    t.join(timeout=20)
    assert not t.is_alive() and read_state(ws)["status"] == "OFFLINE"


def test_a_lasting_failure_is_logged_once_a_minute_not_once_a_pass(daemon, ws):
    daemon.engine.start(daemon=False)
    ws.state_file.write_text("{torn")
    drop(ws, "# MP-1.2\n```bash\ntrue\n```\n")
    for _ in range(5):
        assert daemon.safe_tick().action == "failed"
    assert len(events(ws, "tick_failed")) == 1
