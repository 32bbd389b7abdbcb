"""The polling watcher: stat snapshots every `[watch] polling_interval` seconds.

For network and FUSE filesystems, where inotify sees only this machine's writes.
"""

from __future__ import annotations

from watchdog.observers.polling import PollingObserver

from mp_engine.inbox.watchers.base import ObserverWatcher


class PollingWatcher(ObserverWatcher):
    mode = "polling"

    def _new_observer(self):
        return PollingObserver(timeout=self.target.polling_interval)
