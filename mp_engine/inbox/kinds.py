"""What kind of thing sits in the inbox slot, from one `lstat` (only a regular file can be
an MP). Apart from intake.py so `status` can ask without the intake's machinery."""

from __future__ import annotations

import os
import stat
from enum import StrEnum
from pathlib import Path


class EntryKind(StrEnum):
    FILE = "file"
    SYMLINK = "symlink"
    DIRECTORY = "directory"
    OTHER = "other"


def entry_kind(mode: int) -> EntryKind:
    if stat.S_ISLNK(mode):
        return EntryKind.SYMLINK
    if stat.S_ISDIR(mode):
        return EntryKind.DIRECTORY
    if stat.S_ISREG(mode):
        return EntryKind.FILE
    return EntryKind.OTHER


def slot(path: Path) -> tuple[EntryKind, int] | None:
    """(kind, size) of what is at `path`, never following a link; None when empty."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return entry_kind(st.st_mode), st.st_size
