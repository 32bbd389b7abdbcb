"""What a watcher reacts to: the inbox's write events, and nothing else, as wake-ups."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
    FileSystemMovedEvent,
)

from mp_engine.core.atomic import is_temp_name
from mp_engine.inbox.intake import CLAIMED_PREFIX

SWAP_SUFFIXES = (".swp", ".swx", ".swo", "~", ".tmp")

# What each watch asks the kernel for (watchdog turns the filter into the inotify mask).
# Opens, reads and closes-without-write are never asked for: every `SESSION_STATE.json`
# read by the engine, `status` or an orchestrator would otherwise wake the emitter
# thread, which then competes with the claim for the GIL.
INBOX_EVENTS = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileClosedEvent,
    FileMovedEvent,
    FileDeletedEvent,
    DirCreatedEvent,
    DirMovedEvent,
    DirDeletedEvent,
]
# The workspace root is not watched: every state write there would wake the emitter
# during a claim. A deleted or replaced inbox directory is caught by `healthy()` (its
# inode changed) within `[watch] health_interval`.


@dataclass(frozen=True)
class WatchTarget:
    """What a watcher watches and whom it wakes: it knows nothing else of the engine."""

    inbox_dir: Path
    inbox_file: Path
    wake: Callable[[], None]  # set the loop's wake-up flag
    note_complete: Callable[[], None]  # a writer closed the file or renamed it into place
    emit: Callable[..., object]  # the event log's `emit(event, **fields)`
    polling_interval: float = 1.0  # `[watch] polling_interval`, for the polling observer


def ignorable(path: str) -> bool:
    """Paths whose events never matter: .git/, editor swap files, our own temp files."""
    p = Path(path)
    name = p.name
    return (
        ".git" in p.parts
        or is_temp_name(name)
        or name.startswith((".#", CLAIMED_PREFIX))
        or name.endswith(SWAP_SUFFIXES)
    )


class InboxEventHandler(FileSystemEventHandler):
    """Sets the engine's wake-up flag for events about the inbox; nothing more.

    A close-after-write or a rename onto the inbox file is also passed to the inbox as a
    hint that the file is complete; the tick still decides from `lstat`.
    """

    def __init__(self, target: WatchTarget):
        self.target = target
        self.inbox_file = str(target.inbox_file)
        self.inbox_dir = str(target.inbox_dir)

    def on_any_event(self, event: FileSystemEvent) -> None:
        if isinstance(event, (FileOpenedEvent, FileClosedNoWriteEvent)):
            return
        paths = [os.fsdecode(event.src_path)]
        if isinstance(event, FileSystemMovedEvent):
            paths.append(os.fsdecode(event.dest_path))
        relevant = [p for p in paths if not ignorable(p) and p in (self.inbox_file, self.inbox_dir)]
        if not relevant:
            return
        completes = isinstance(event, FileClosedEvent) or (
            isinstance(event, FileSystemMovedEvent) and os.fsdecode(event.dest_path) == self.inbox_file
        )
        if completes:
            self.target.note_complete()
        self.target.wake()
