"""`[watch] mode = "auto"`: the native watcher, falling back to polling; and the one
place a mode name becomes a watcher."""

from __future__ import annotations

from watchdog.observers.api import BaseObserver

from mp_engine.inbox.watchers.base import ObserverWatcher
from mp_engine.inbox.watchers.events import WatchTarget
from mp_engine.inbox.watchers.native import NativeWatcher, native_observer
from mp_engine.inbox.watchers.polling import PollingWatcher, polling_observer


class AutoWatcher(ObserverWatcher):
    """The native watcher, falling back to polling when it cannot start (for example
    when `fs.inotify.max_user_watches` is used up)."""

    mode = "native"

    def _new_observer(self) -> BaseObserver:
        if self.mode == "polling":
            return polling_observer(self.target)
        return native_observer(self.target)

    def start(self) -> None:
        try:
            super().start()
        except OSError as e:
            if self.mode == "polling":
                raise
            self.target.emit("watcher_fallback", mode="polling", error=str(e))
            self.mode = "polling"
            super().start()


def make_watcher(mode: str, target: WatchTarget) -> ObserverWatcher:
    """`[watch] mode`: auto, native or polling."""
    cls = {"auto": AutoWatcher, "native": NativeWatcher, "polling": PollingWatcher}[mode]
    return cls(target)
