"""The native watcher: watchdog's platform observer (inotify on Linux)."""

from __future__ import annotations

from watchdog.observers import Observer

from mp_engine.inbox.watchers.base import ObserverWatcher


class NativeWatcher(ObserverWatcher):
    mode = "native"

    def _new_observer(self):
        return Observer()
