"""What sits in the inbox slot, from one lstat."""

from __future__ import annotations

import os

from mp_engine.inbox.kinds import EntryKind, slot


def test_each_kind_and_an_empty_slot(tmp_path):
    f = tmp_path / "f"
    assert slot(f) is None and slot(tmp_path / "no" / "f") is None
    f.write_text("abc")
    assert slot(f) == (EntryKind.FILE, 3)
    link = tmp_path / "l"
    link.symlink_to(f)
    assert slot(link)[0] is EntryKind.SYMLINK
    assert slot(tmp_path)[0] is EntryKind.DIRECTORY
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    assert slot(fifo)[0] is EntryKind.OTHER
