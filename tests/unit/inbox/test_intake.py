"""The inbox decides from lstat, never from events: settle, hints, and safe reads."""

from __future__ import annotations

import os

import pytest

from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.intake import EntryKind, Inbox


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


def fresh(ws, text: bytes = b"# MP-1.0\n") -> None:
    ws.inbox_file.write_bytes(text)


def test_an_empty_inbox_is_idle(ws):
    assert Inbox(ws, 5).scan().entry is None


def test_a_fresh_file_settles_then_is_ready(ws, clock):
    fresh(ws)
    wall = os.stat(ws.inbox_file).st_mtime
    inbox = Inbox(ws, 5, monotonic=clock, wall=lambda: wall + 1)
    first = inbox.scan()
    assert not first.ready and first.wait_until is not None and first.wait_until <= clock.t + 5
    clock.t += 5
    assert inbox.scan().ready


def test_a_close_write_hint_makes_it_ready_at_once_but_only_for_that_version(ws, clock):
    fresh(ws)
    wall = os.stat(ws.inbox_file).st_mtime
    inbox = Inbox(ws, 60, monotonic=clock, wall=lambda: wall)
    inbox.note_complete()
    assert inbox.scan().ready
    with open(ws.inbox_file, "ab") as f:  # appended to after the hint: a new version
        f.write(b"more\n")
        f.flush()
        os.utime(ws.inbox_file, ns=(0, int((wall + 0.5) * 1e9)))
    assert not inbox.scan().ready


def test_an_old_file_found_at_start_is_ready(ws, clock):
    fresh(ws)
    wall = os.stat(ws.inbox_file).st_mtime
    assert Inbox(ws, 5, monotonic=clock, wall=lambda: wall + 60).scan().ready


def test_read_returns_the_bytes_and_forget_clears_the_hints(ws):
    fresh(ws, b"# MP-1.0 T\n\xe2\x82\xac")
    inbox = Inbox(ws, 0)
    scan = inbox.scan()
    assert scan.ready and scan.entry.kind is EntryKind.FILE
    assert inbox.read(scan.entry, 1024) == b"# MP-1.0 T\n\xe2\x82\xac"
    inbox.note_complete()
    inbox.forget()
    assert inbox._complete_marks == set()


def test_a_file_changed_since_its_scan_is_read_again_later(ws):
    fresh(ws)
    inbox = Inbox(ws, 0)
    entry = inbox.scan().entry
    ws.inbox_file.write_bytes(b"# MP-2.0 replaced while we looked\n")
    assert inbox.read(entry, 1024) is None


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo", "oversize"])
def test_entries_that_can_never_be_an_mp_are_refused_with_a_fix(ws, tmp_path, kind):
    if kind == "symlink":
        target = tmp_path / "elsewhere.txt"
        target.write_text("# MP-1.0\n")
        os.symlink(target, ws.inbox_file)
    elif kind == "directory":
        ws.inbox_file.mkdir()
    elif kind == "fifo":
        os.mkfifo(ws.inbox_file)
    else:
        fresh(ws, b"x" * 2048)
    inbox = Inbox(ws, 0)
    scan = inbox.scan()
    assert scan.ready  # nothing to wait for: refused at once
    with pytest.raises(InvalidMPError) as e:
        inbox.read(scan.entry, 1024)
    assert e.value.fix


def test_a_file_removed_after_a_hint_forgets_the_hint(ws, clock):
    fresh(ws)
    inbox = Inbox(ws, 60, monotonic=clock, wall=lambda: os.stat(ws.inbox_file).st_mtime)
    inbox.note_complete()
    ws.inbox_file.unlink()
    assert inbox.scan().entry is None
    fresh(ws, b"# MP-1.0\n")  # the same bytes again, a new file: it must settle again
    os.utime(ws.inbox_file, ns=(0, os.stat(ws.inbox_file).st_mtime_ns + 10**9))
    assert not inbox.scan().ready


def test_a_file_dated_in_the_future_still_settles_by_observation(ws, clock):
    fresh(ws)
    mtime = os.stat(ws.inbox_file).st_mtime
    inbox = Inbox(ws, 5, monotonic=clock, wall=lambda: mtime - 3600)  # the writer's clock is ahead
    assert not inbox.scan().ready
    clock.t += 5
    assert inbox.scan().ready


def test_a_version_completed_while_the_claim_was_written_is_queued_when_the_run_starts(ws):
    """RUNNING is published before the claim's archive and ledger are written; an MP sent in
    that moment was seen complete before the engine was busy. It is queued as the run
    starts, so that replaced before its turn it still gets a result (issue #45's soak)."""
    import hashlib

    inbox = Inbox(ws, 60)
    running = b"# MP-1.1 Running\n\n```bash\ntrue\n```\n"
    fresh(ws, running)
    inbox.note_complete()  # the claimed MP itself, seen complete
    fresh(ws, b"# MP-1.2 Next\n\n```bash\ntrue\n```\n")  # sent while the claim was written
    inbox.note_complete()
    assert inbox.queue.entries() == []  # not busy yet: nothing queued
    inbox.run_started(hashlib.sha256(running).hexdigest())
    (queued,) = inbox.queue.entries()
    assert queued.kind == "seen" and queued.data().startswith(b"# MP-1.2")


def test_the_claimed_version_itself_is_not_queued_when_its_run_starts(ws):
    import hashlib

    inbox = Inbox(ws, 60)
    running = b"# MP-1.1 Running\n\n```bash\ntrue\n```\n"
    fresh(ws, running)
    inbox.note_complete()
    inbox.run_started(hashlib.sha256(running).hexdigest())
    assert inbox.queue.entries() == []
