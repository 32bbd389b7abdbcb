"""The polling watcher: stat snapshots every `[watch] polling_interval` seconds.

For network and FUSE filesystems, where inotify sees only this machine's writes.
"""

from __future__ import annotations

from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from mp_engine.inbox.watchers.base import ObserverWatcher
from mp_engine.inbox.watchers.events import WatchTarget


def polling_observer(target: WatchTarget) -> BaseObserver:
    return PollingObserver(timeout=target.polling_interval)


class PollingWatcher(ObserverWatcher):
    mode = "polling"

    def _new_observer(self) -> BaseObserver:
        return polling_observer(self.target)
