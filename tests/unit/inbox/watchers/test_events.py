"""The event filter: only the inbox file and directory wake the loop, and only writes."""

from __future__ import annotations

from watchdog.events import (
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileMovedEvent,
    FileOpenedEvent,
)

from mp_engine.inbox.watchers.events import InboxEventHandler, WatchTarget, ignorable


class Recorder:
    def __init__(self, ws) -> None:
        self.wakes = 0
        self.completes = 0
        self.target = WatchTarget(ws.inbox_dir, ws.inbox_file, self.wake, self.complete, lambda *a, **k: None)

    def wake(self) -> None:
        self.wakes += 1

    def complete(self) -> None:
        self.completes += 1


def test_ignorable_paths():
    assert ignorable("/w/.git/index")
    assert ignorable("/w/Claude_Inbox/.incoming_microproject.txt.swp")
    assert ignorable("/w/Claude_Inbox/.mpe-claimed-20260101T000000Z-MP-1.0")
    assert ignorable("/w/Claude_Inbox/incoming_microproject.txt~")
    assert not ignorable("/w/Claude_Inbox/incoming_microproject.txt")


def test_a_close_after_write_wakes_and_marks_complete(ws):
    r = Recorder(ws)
    h = InboxEventHandler(r.target)
    h.on_any_event(FileCreatedEvent(str(ws.inbox_file)))
    assert (r.wakes, r.completes) == (1, 0)
    h.on_any_event(FileClosedEvent(str(ws.inbox_file)))
    assert (r.wakes, r.completes) == (2, 1)


def test_a_rename_onto_the_inbox_file_is_complete_and_one_away_is_not(ws):
    r = Recorder(ws)
    h = InboxEventHandler(r.target)
    h.on_any_event(FileMovedEvent(str(ws.inbox_dir / "draft.txt"), str(ws.inbox_file)))
    assert (r.wakes, r.completes) == (1, 1)
    h.on_any_event(FileMovedEvent(str(ws.inbox_file), str(ws.inbox_dir / "elsewhere.txt")))
    assert (r.wakes, r.completes) == (2, 1)


def test_reads_and_other_files_do_not_wake(ws):
    r = Recorder(ws)
    h = InboxEventHandler(r.target)
    h.on_any_event(FileOpenedEvent(str(ws.inbox_file)))
    h.on_any_event(FileClosedNoWriteEvent(str(ws.inbox_file)))
    h.on_any_event(FileCreatedEvent(str(ws.inbox_dir / "notes.txt")))
    assert r.wakes == 0
