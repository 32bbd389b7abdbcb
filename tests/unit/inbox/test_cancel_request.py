"""Cancel requests: parsing, where they are found, and the watch that fires on one."""

from __future__ import annotations

import os
import threading
import time

from mp_engine.inbox.cancel_request import (
    WRITE_GRACE,
    CancelWatch,
    consumed,
    host_path,
    inbox_path,
    parse_request,
    pending,
    request_on_host,
)
from tests.conftest import wait_for


def test_the_first_non_blank_line_names_the_mp():
    assert parse_request(b"\n  MP-1.4  \nwhy: too slow\n") == "MP-1.4"
    assert parse_request(b"MP-1.4 because it hangs\n") == "MP-1.4"
    assert parse_request(b"cancel MP-1.4\n") is None
    assert parse_request(b"") is None and parse_request(b"\xff\xfe") is None


def test_pending_finds_both_files_and_sets_apart_the_unreadable(ws):
    assert pending(ws) == ([], [])
    request_on_host(ws, "MP-1.1")
    inbox_path(ws).write_text("")  # created, not yet written: it may still be being written
    found, bad = pending(ws)
    assert [(r.mp_id, r.source) for r in found] == [("MP-1.1", "host")] and bad == []
    inbox_path(ws).write_text("nonsense\n")
    settled = time.time() - WRITE_GRACE - 1
    os.utime(inbox_path(ws), (settled, settled))  # left alone for a while: it names no MP
    found, bad = pending(ws)
    assert len(found) == 1 and bad == [inbox_path(ws)]


def test_the_watch_fires_on_a_request_for_its_mp_only(ws):
    stop_now = threading.Event()
    with CancelWatch(ws, "MP-2.1", stop_now) as watch:
        inbox_path(ws).write_text("MP-2.0\n")  # another MP's
        request_on_host(ws, "MP-2.1")
        wait_for(watch.cancelled.is_set, what="the watch to fire")
    assert stop_now.is_set() and watch.request.source == "host" and watch.request.mp_id == "MP-2.1"


def test_the_watch_asks_the_remote_and_survives_its_failures(ws):
    answers = iter([OSError("unreachable"), None, b"MP-3.1\n"])

    def remote() -> bytes | None:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    stop_now = threading.Event()
    with CancelWatch(ws, "MP-3.1", stop_now, remote, remote_every=0.01) as watch:
        wait_for(watch.cancelled.is_set, what="the remote's request")
    assert watch.request.source == "remote" and watch.request.path is None


def test_a_request_already_there_fires_before_the_run_starts(ws):
    request_on_host(ws, "MP-4.1")
    with CancelWatch(ws, "MP-4.1", threading.Event()) as watch:
        assert watch.cancelled.is_set()


def test_consumed_removes_an_inbox_request_before_publishing_and_a_host_one_after(ws):
    inbox_path(ws).write_text("MP-5.1\n")
    request_on_host(ws, "MP-5.1")
    (inbox_req,) = [r for r in pending(ws)[0] if r.source == "inbox"]
    (host_req,) = [r for r in pending(ws)[0] if r.source == "host"]
    assert consumed(inbox_req, lambda: inbox_path(ws).exists()) is False
    assert consumed(host_req, lambda: host_path(ws).exists()) is True and not host_path(ws).exists()
