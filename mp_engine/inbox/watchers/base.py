"""The shared part of every watcher: an event filter and a self-healing observer."""

from __future__ import annotations

import os
import time
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

from mp_engine.atomic import is_temp_name
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
    emit: Callable[..., None]  # the event log's `emit(event, **fields)`
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


class ObserverWatcher:
    """Runs a watchdog observer on the inbox directory; restarts it when it dies.

    watchdog's inotify emitter thread ends when its directory is deleted
    (gorakhargosh/watchdog#570) while the observer thread lives on, so health means: the
    observer and every emitter are alive, and the inbox is still the inode we watch.
    """

    mode = "base"

    def __init__(self, target: WatchTarget):
        self.target = target
        self.observer = None
        self._inbox_ino: int | None = None

    def _new_observer(self):  # overridden by each implementation
        raise NotImplementedError

    def start(self) -> None:
        inbox_dir = self.target.inbox_dir
        inbox_dir.mkdir(parents=True, exist_ok=True)
        observer = self._new_observer()
        handler = InboxEventHandler(self.target)
        observer.schedule(handler, str(inbox_dir), recursive=False, event_filter=INBOX_EVENTS)
        observer.daemon = True
        observer.start()
        self.observer = observer
        self._inbox_ino = os.stat(inbox_dir).st_ino
        _wait_until_watching(observer)

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=5)
            self.observer = None

    def healthy(self) -> bool:
        obs = self.observer
        if obs is None or not obs.is_alive() or not all(e.is_alive() for e in obs.emitters):
            return False
        try:
            return os.stat(self.target.inbox_dir).st_ino == self._inbox_ino
        except FileNotFoundError:
            return False

    def ensure_healthy(self) -> bool:
        """Restart the observer if it is not healthy; True if it had to."""
        if self.healthy():
            return False
        self.target.emit("watcher_restarted", mode=self.mode)
        # The new observer starts before the old one stops: stopping closes the old inotify
        # descriptor while its reader thread may still be in read(); a new descriptor that
        # reused that number would then have its events eaten by the dying thread.
        old = self.observer
        self.start()
        if old is not None:
            old.stop()
            old.join(timeout=5)
        self.target.wake()  # anything may have arrived while we were blind
        return True


def _wait_until_watching(observer, timeout: float = 2.0) -> None:
    """Return once every emitter has its kernel watch (inotify adds it in the emitter's own
    thread, after `start()` returned): a file closed in between would lose its
    close-write event and wait out the settle time instead."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # `_inotify` is watchdog's InotifyEmitter state; other emitters do not have it.
        if all(getattr(e, "_inotify", True) is not None for e in observer.emitters):
            return
        time.sleep(0.001)
