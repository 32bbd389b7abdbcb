"""The shared part of every watcher: a self-healing watchdog observer on the inbox."""

from __future__ import annotations

import os
import time

from watchdog.observers.api import BaseObserver

from mp_engine.inbox.watchers.events import INBOX_EVENTS, InboxEventHandler, WatchTarget


class ObserverWatcher:
    """Runs a watchdog observer on the inbox directory; restarts it when it dies.

    watchdog's inotify emitter thread ends when its directory is deleted
    (gorakhargosh/watchdog#570) while the observer thread lives on, so health means: the
    observer and every emitter are alive, and the inbox is still the inode we watch.
    """

    mode = "base"

    def __init__(self, target: WatchTarget):
        self.target = target
        self.observer: BaseObserver | None = None
        self._inbox_ino: int | None = None

    def _new_observer(self) -> BaseObserver:  # overridden by each implementation
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


def _wait_until_watching(observer: BaseObserver, timeout: float = 2.0) -> None:
    """Return once every emitter has its kernel watch (inotify adds it in the emitter's own
    thread, after `start()` returned): a file closed in between would lose its
    close-write event and wait out the settle time instead."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # `_inotify` is watchdog's InotifyEmitter state; other emitters do not have it.
        if all(getattr(e, "_inotify", True) is not None for e in observer.emitters):
            return
        time.sleep(0.001)
