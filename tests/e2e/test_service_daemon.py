"""The real daemon under a (simulated) service manager: sd_notify over a real AF_UNIX datagram
socket, the watchdog, the stall limit and the metrics endpoint, scraped over HTTP.

The blocked loop is an honest one, not a test hook: the test process holds the workspace
lock while an MP waits in the inbox, and `[engine] lock_timeout` is long, so the daemon's
tick waits for the lock the way it would behind a wedged second engine.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time

import pytest

from mp_engine.core.clock import parse_iso
from mp_engine.core.lock import WorkspaceLock
from tests.conftest import drop, events, read_state, wait_for
from tests.serviceutil import BLOCKING_MP, NotifySocket, scrape

pytestmark = pytest.mark.daemon


@pytest.fixture
def notify():
    receiver = NotifySocket()
    yield receiver
    receiver.close()


def test_ready_only_after_the_rescan_status_lines_and_stopping_on_sigterm(ws, daemon_factory, notify):
    # Waiting before the engine starts, written long ago: the first rescan must claim it. (A
    # file younger than [engine] settle_seconds is still settling, and READY rightly goes
    # out before the claim; backdating keeps the order this test pins down deterministic.)
    drop(ws, BLOCKING_MP)
    os.utime(ws.inbox_file, (time.time() - 3600, time.time() - 3600))
    d = daemon_factory(ws.root, env={"NOTIFY_SOCKET": notify.address}).start()
    ready = notify.wait_for(lambda m: m.get("READY") == "1", what=d.output)
    # READY came after the rescan had claimed the MP (a long first MP must not delay READY
    # until it ends: the step's heartbeat sends it).
    assert events(ws, "mp_claimed") and read_state(ws)["status"] == "RUNNING"
    running = ready if "running" in ready.get("STATUS", "") else notify.wait_for(lambda m: "STATUS" in m)
    assert running["STATUS"] == "running MP-9.1 step 1/2"
    (ws.root / "release").touch()
    idle = notify.wait_for(lambda m: m.get("STATUS", "").startswith("idle"), what=d.output)
    assert idle["STATUS"] == "idle, last MP-9.1 COMPLETED just now"
    assert (ws.root / "done.txt").exists()

    drop(ws, "# MP-9.2\n\n```bash\nexit 4\n```\n")
    halted = notify.wait_for(lambda m: m.get("STATUS", "").startswith("halted"), what=d.output)
    assert halted["STATUS"].startswith("halted: MP-9.2 ERROR awaiting approval (")

    d.signal(signal.SIGTERM)
    stopping = notify.wait_for(lambda m: m.get("STOPPING") == "1", what=d.output)
    assert stopping["STATUS"].startswith("stopping (halted: MP-9.2")
    assert d.wait() == 0
    assert sum(m.get("READY") == "1" for m in notify.messages) == 1
    assert "WATCHDOG" not in {k for m in notify.messages for k in m}  # WATCHDOG_USEC unset: no pings


def test_abstract_notify_socket_and_watchdog_pings_while_idle(ws, daemon_factory):
    receiver = NotifySocket(f"@mp-engine-test-{secrets.token_hex(6)}")
    try:
        env = {"NOTIFY_SOCKET": receiver.address, "WATCHDOG_USEC": "300000"}
        d = daemon_factory(ws.root, env=env).start()
        ready = receiver.wait_for(lambda m: m.get("READY") == "1", what=d.output)
        assert ready["STATUS"] == "idle, no MP run yet"
        # The idle loop keeps proving it is alive: three pings, each in its own pass.
        wait_for(
            lambda: receiver.drain() is not None and sum(m.get("WATCHDOG") == "1" for m in receiver.messages) >= 3,
            what=lambda: f"three WATCHDOG=1; got {receiver.messages}\n{d.output()}",
        )
        d.signal(signal.SIGTERM)
        receiver.wait_for(lambda m: m.get("STOPPING") == "1")
        assert d.wait() == 0
    finally:
        receiver.close()


def test_a_blocked_loop_stops_the_watchdog_and_the_stall_limit_exits_nonzero(ws, daemon_factory, notify):
    env = {
        "NOTIFY_SOCKET": notify.address,
        "WATCHDOG_USEC": "300000",  # a ping every 0.15 s while the loop is healthy
        "MP_ENGINE_ENGINE__LOCK_TIMEOUT": "600",  # the tick waits for the lock "forever"
        "MP_ENGINE_WATCH__STALL_LIMIT": "3",
    }
    d = daemon_factory(ws.root, env=env).start()
    notify.wait_for(lambda m: m.get("READY") == "1", what=d.output)
    notify.wait_for(lambda m: m.get("WATCHDOG") == "1", what=d.output)
    with WorkspaceLock(ws.lock_file, 5).hold("test: a wedged second engine"):
        drop(ws, "# MP-9.3\n\n```bash\ntouch ran\n```\n")
        wait_for(lambda: "waiting for workspace lock" in d.output(), what=d.output)
        notify.drain()  # everything the loop sent before it blocked
        blocked_from = len(notify.messages)
        rc = d.wait(timeout=60)
        notify.drain()
    after = notify.messages[blocked_from:]
    assert rc == 9, d.output()
    assert not any(m.get("WATCHDOG") for m in after), f"pinged while blocked: {after}"
    assert any(m.get("STATUS", "").startswith("stalled: the main loop made no progress") for m in after)
    stalled = events(ws, "engine_stalled")
    assert stalled and "watch.stall_limit = 3 s" in stalled[-1]["detail"]
    fields = stalled[-1]
    assert (fields["from_state"], fields["to_state"], fields["threshold_secs"]) == ("running", "stalled", 3.0)
    assert parse_iso(fields["last_heartbeat_ts"]) < parse_iso(fields["ts"])
    assert not (ws.root / "ran").exists()


def test_a_long_step_keeps_the_watchdog_fed_and_does_not_trip_the_stall_limit(ws, daemon_factory, notify):
    stall = 1.5
    env = {"NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "400000", "MP_ENGINE_WATCH__STALL_LIMIT": str(stall)}
    d = daemon_factory(ws.root, env=env).start()
    notify.wait_for(lambda m: m.get("READY") == "1", what=d.output)
    drop(ws, BLOCKING_MP)
    notify.wait_for(lambda m: m.get("STATUS") == "running MP-9.1 step 1/2", what=d.output)
    during = len(notify.messages)
    until = time.monotonic() + 3 * stall  # three stall limits inside one step
    wait_for(lambda: notify.drain() is not None and time.monotonic() >= until, timeout=30)
    pings = [m for m in notify.messages[during:] if m.get("WATCHDOG") == "1"]
    assert d.proc is not None and d.proc.poll() is None, d.output()
    assert len(pings) >= 3, notify.messages[during:]
    (ws.root / "release").touch()
    wait_for(lambda: read_state(ws)["last_completed"] == "MP-9.1", what=d.output)
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
    assert not events(ws, "engine_stalled")


def test_a_stall_limit_below_the_idle_wait_is_refused_before_start(ws):
    proc = subprocess.run(
        [sys.executable, "-m", "mp_engine", "run", "--root", str(ws.root)],
        capture_output=True,
        text=True,
        env={**os.environ, "MP_ENGINE_WATCH__STALL_LIMIT": "0.1"},
        timeout=60,
    )
    assert proc.returncode == 2
    assert "watch.stall_limit = 0.1 s is not above the loop's longest idle wait" in proc.stderr


def test_metrics_are_scraped_over_http_from_the_daemon(ws, daemon_factory):
    d = daemon_factory(ws.root, env={"MP_ENGINE_METRICS__LISTEN": "127.0.0.1:0"}).start()
    listening = wait_for(lambda: events(ws, "metrics_listening"), what=d.output)[-1]
    address = listening["address"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+", address)
    before = scrape(address)
    assert before['mp_engine_mps_total{status="COMPLETED"}'] == 0
    assert before["mp_engine_halted"] == 0
    assert before["mp_engine_seconds_since_last_sync"] != before["mp_engine_seconds_since_last_sync"]  # NaN: git off

    drop(ws, "# MP-9.4\n\n```bash\ntrue\n```\n\n```bash\ntrue\n```\n")
    wait_for(lambda: read_state(ws)["last_completed"] == "MP-9.4", what=d.output)
    drop(ws, "# MP-9.5\n\n```bash\nexit 2\n```\n")
    wait_for(lambda: read_state(ws)["status"] == "ERROR", what=d.output)
    wait_for(lambda: events(ws, "halted"))
    after = scrape(address)
    assert after['mp_engine_mps_total{status="COMPLETED"}'] == 1
    assert after['mp_engine_mps_total{status="ERROR"}'] == 1
    assert after["mp_engine_step_duration_seconds_count"] == 3  # two steps, one failed step
    assert after['mp_engine_mp_duration_seconds_count{status="COMPLETED"}'] == 1
    assert after['mp_engine_mp_duration_seconds_count{status="ERROR"}'] == 1
    assert after["mp_engine_halted"] == 1
    assert after['mp_engine_sync_failures_total{event="sync_failed"}'] == 0
    d.signal(signal.SIGTERM)
    assert d.wait() == 0
