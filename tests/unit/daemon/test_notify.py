"""notify.py against a real AF_UNIX datagram socket: paths, abstract names, errors, the watchdog interval."""

from __future__ import annotations

import json
import os
import secrets

from mp_engine.daemon.notify import Notifier, watchdog_interval
from mp_engine.record import logs
from tests.serviceutil import NotifySocket


def test_sends_key_value_lines_to_a_socket_path():
    receiver = NotifySocket()
    try:
        n = Notifier(receiver.address)
        assert n.send(READY=1, STATUS="idle, last MP-1.4 COMPLETED 3 min ago")
        assert n.send(STATUS="two\nlines")  # one line: a newline would start a bogus assignment
        assert receiver.wait_for(lambda m: "READY" in m) == {
            "READY": "1",
            "STATUS": "idle, last MP-1.4 COMPLETED 3 min ago",
        }
        assert receiver.wait_for(lambda m: m.get("STATUS", "").startswith("two")) == {"STATUS": "two lines"}
        n.close()
    finally:
        receiver.close()


def test_abstract_socket_names_start_with_at():
    name = f"@mp-engine-test-{secrets.token_hex(6)}"
    receiver = NotifySocket(name)
    try:
        n = Notifier.from_env({"NOTIFY_SOCKET": name})
        assert n.enabled and n.send(WATCHDOG=1)
        assert receiver.wait_for(lambda m: True) == {"WATCHDOG": "1"}
    finally:
        receiver.close()


def test_unset_socket_is_a_quiet_no_op():
    n = Notifier.from_env({})
    assert not n.enabled
    assert n.send(READY=1) is False


def test_a_failed_send_is_logged_not_swallowed(tmp_path, capfd):
    logs.configure("info", json_lines=True)
    n = Notifier(str(tmp_path / "nobody-listens.sock"))
    assert n.send(READY=1) is False
    logged = [json.loads(line) for line in capfd.readouterr().err.splitlines() if line.startswith("{")]
    failure = next(rec for rec in logged if rec["event"] == "sd_notify failed")
    assert failure["level"] == "error" and "nobody-listens.sock" in failure["socket"]
    assert "READY=1" in failure["message"]


def test_watchdog_interval_is_half_of_watchdog_usec_and_only_for_this_pid():
    assert watchdog_interval({"WATCHDOG_USEC": "4000000"}) == 2.0
    assert watchdog_interval({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}) == 2.0
    assert watchdog_interval({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid() + 1)}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({}) is None
