"""`mp-engine cancel` without a daemon: what it refuses, and a request left for later."""

from __future__ import annotations

from mp_engine.commands.cancel import cancel
from mp_engine.core.exitcodes import ExitCode
from mp_engine.inbox.cancel_request import host_path


def test_nothing_running_and_no_id_is_a_usage_error(ws):
    said: list[str] = []
    assert cancel(ws.root, None, 0.1, said.append, said.append) == ExitCode.USAGE
    assert "no MP is running" in said[0] and not host_path(ws).exists()


def test_a_bad_id_is_refused(ws):
    said: list[str] = []
    assert cancel(ws.root, "1.4", 0.1, said.append, said.append) == ExitCode.USAGE
    assert "not an MP id" in said[0]


def test_without_a_daemon_the_request_stays_for_its_start(ws):
    said: list[str] = []
    assert cancel(ws.root, "MP-1.4", 0.1, said.append, said.append) == ExitCode.SEND_TIMEOUT
    assert host_path(ws).read_text() == "MP-1.4\n" and "takes effect when the daemon runs" in said[0]
