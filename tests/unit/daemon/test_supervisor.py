"""The supervisor in-process: READY after the first pass, WATCHDOG only while the observer
lives, STATUS in words, STOPPING once, and the last good sync recorded."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.errors import ConfigError
from mp_engine.daemon.health import read_last_sync_ok
from mp_engine.daemon.loop import Daemon
from mp_engine.daemon.notify import Notifier
from mp_engine.daemon.supervisor import Supervisor
from mp_engine.inbox.watchers.native import NativeWatcher
from mp_engine.pipeline.context import TickResult
from mp_engine.pipeline.engine import Engine
from tests.conftest import events
from tests.serviceutil import NotifySocket


@pytest.fixture
def notify():
    sock = NotifySocket()
    yield sock
    sock.close()


@pytest.fixture
def engine(ws) -> Engine:
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def supervised(engine: Engine, notify: NotifySocket, monkeypatch, watchdog_usec: str | None = None) -> Supervisor:
    if watchdog_usec:
        monkeypatch.setenv("WATCHDOG_USEC", watchdog_usec)
    return Supervisor(engine, engine.config, Notifier(notify.address)).install()


def test_ready_and_status_come_after_the_first_pass_not_before(engine, notify, monkeypatch):
    sup = supervised(engine, notify, monkeypatch)
    try:
        assert notify.drain() == []  # installed, but no pass has ended yet
        sup.after_tick(TickResult("idle"))
        first = notify.wait_for(lambda m: "READY" in m)
        assert first["READY"] == "1" and first["STATUS"] == "idle, no MP run yet"
        sup.after_tick(TickResult("idle"))
        assert [m for m in notify.drain() if "READY" in m] == []  # READY once
    finally:
        sup.uninstall()


def test_the_watchdog_is_fed_only_while_the_observer_lives(engine, notify, monkeypatch):
    sup = supervised(engine, notify, monkeypatch, watchdog_usec="200000")  # a ping every 0.1 s
    watcher = NativeWatcher(Daemon(engine).watch_target())
    try:
        sup.after_tick(TickResult("idle"))
        assert not any("WATCHDOG" in m for m in notify.drain())  # no observer yet: no proof of life
        watcher.start()
        sup.loop_started(watcher)
        sup._next_ping = 0.0
        sup.after_tick(TickResult("idle"))
        assert notify.wait_for(lambda m: "WATCHDOG" in m)["WATCHDOG"] == "1"
        watcher.stop()
        sup._next_ping = 0.0
        sup.after_tick(TickResult("idle"))
        assert not any("WATCHDOG" in m for m in notify.drain())
        assert sup.max_wait() <= 0.1
    finally:
        watcher.stop()
        sup.uninstall()


def test_a_heartbeat_from_another_thread_proves_nothing(engine, notify, monkeypatch):
    sup = supervised(engine, notify, monkeypatch)
    try:
        before = sup.last_progress
        t = threading.Thread(target=sup.heartbeat)
        t.start()
        t.join()
        assert sup.last_progress == before and not sup.ready
        sup.heartbeat()  # the loop's own thread, from a running step
        assert sup.ready and sup.last_progress > before
    finally:
        sup.uninstall()


def test_stopping_is_sent_once(engine, notify, monkeypatch):
    sup = supervised(engine, notify, monkeypatch)
    try:
        sup.stopping()
        sup.stopping()
        stops = [m for m in notify.drain() if "STOPPING" in m]
        assert len(stops) == 1 and stops[0]["STATUS"].startswith("stopping (")
    finally:
        sup.uninstall()


def test_a_stall_limit_the_idle_loop_would_trip_is_refused(ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_WATCH__STALL_LIMIT", "0.001")
    engine = Engine(ws, load_config(ws.root))
    with pytest.raises(ConfigError, match="stall_limit"):
        Supervisor(engine, engine.config, Notifier(None))


def test_sync_events_decide_the_last_good_sync(engine, notify, monkeypatch, ws):
    sup = supervised(engine, notify, monkeypatch)
    try:
        assert read_last_sync_ok(ws.local_dir) is None
        engine.events.emit("sync_failed", stage="poll", error="boom")
        assert read_last_sync_ok(ws.local_dir) is None
        engine.events.emit("sync_pushed", branch="main", head="abc")
        assert read_last_sync_ok(ws.local_dir) is not None
    finally:
        sup.uninstall()


def test_metrics_on_a_port_another_process_holds_is_a_config_error_naming_the_key(ws, monkeypatch):
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    monkeypatch.setenv("MP_ENGINE_METRICS__LISTEN", f"127.0.0.1:{port}")
    engine = Engine(ws, load_config(ws.root))
    sup = Supervisor(engine, engine.config, Notifier(None)).install()
    try:
        with pytest.raises(ConfigError, match=f"metrics.listen = '127.0.0.1:{port}': cannot listen there"):
            sup.start_metrics()
    finally:
        sup.uninstall()
        held.close()


def test_metrics_listen_and_are_fed_by_the_event_log(ws, monkeypatch):
    from tests.serviceutil import scrape

    monkeypatch.setenv("MP_ENGINE_METRICS__LISTEN", "127.0.0.1:0")
    engine = Engine(ws, load_config(ws.root))
    sup = Supervisor(engine, engine.config, Notifier(None)).install()
    try:
        sup.start_metrics()
        address = [e for e in events(ws, "metrics_listening")][-1]["address"]
        engine.events.emit("mp_failed", mp="MP-1.0", run="r", kind="timeout", summary="s", fix="f")
        assert scrape(address)['mp_engine_mps_total{status="ERROR"}'] == 1.0
    finally:
        sup.uninstall()


NOW = datetime(2026, 11, 22, 15, 16, 0, 500000, tzinfo=UTC)


def test_the_stall_event_says_from_which_state_to_which_since_when_and_past_what(ws, monkeypatch):
    # issue #44: the Micro-Task Executor's FR-EVT-WF-RECOVERY fields on a running -> stalled transition.
    monkeypatch.setenv("MP_ENGINE_WATCH__STALL_LIMIT", "120")
    engine = Engine(ws, load_config(ws.root))
    fields = Supervisor(engine, engine.config, Notifier(None)).stall_fields("no progress", 130.5, NOW.timestamp())
    assert fields == {
        "detail": "no progress",
        "from_state": "running",
        "to_state": "stalled",
        "reason": "no progress",
        "last_heartbeat_ts": "2026-11-22T15:13:50.000Z",  # 130.5 s before NOW
        "threshold_secs": 120.0,
        "actor": "system",
    }
