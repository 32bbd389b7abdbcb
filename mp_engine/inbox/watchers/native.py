"""The native watcher: watchdog's platform observer (inotify on Linux)."""

from __future__ import annotations

from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from mp_engine.inbox.watchers.base import ObserverWatcher
from mp_engine.inbox.watchers.events import WatchTarget


def native_observer(target: WatchTarget) -> BaseObserver:
    """The platform's observer (`target`: the polling observer's signature, for `AutoWatcher`)."""
    return Observer()


class NativeWatcher(ObserverWatcher):
    mode = "native"

    def _new_observer(self) -> BaseObserver:
        return native_observer(self.target)
