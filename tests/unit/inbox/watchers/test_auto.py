"""`[watch] mode = "auto"`: the native observer, or polling when it cannot start."""

from __future__ import annotations

import errno

from watchdog.observers.inotify import InotifyObserver

from mp_engine.inbox.watchers.auto import AutoWatcher, make_watcher
from mp_engine.inbox.watchers.events import WatchTarget


def target(ws, emitted: list) -> WatchTarget:
    return WatchTarget(
        ws.inbox_dir, ws.inbox_file, lambda: None, lambda: None, lambda e, **f: emitted.append((e, f)), 0.1
    )


class NoWatchesLeft(InotifyObserver):
    """The native observer when `fs.inotify.max_user_watches` is used up: adding the watch
    fails with ENOSPC, as inotify_add_watch(2) does."""

    def schedule(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "inotify watch limit reached")


class Exhausted(AutoWatcher):
    def _new_observer(self):
        return NoWatchesLeft() if self.mode == "native" else super()._new_observer()


def test_auto_falls_back_to_polling_and_says_so(ws):
    emitted: list = []
    w = Exhausted(target(ws, emitted))
    w.start()
    try:
        assert w.mode == "polling" and w.healthy()
        assert emitted[0][0] == "watcher_fallback" and "watch limit" in emitted[0][1]["error"]
    finally:
        w.stop()


def test_each_mode_builds_its_watcher(ws):
    for mode, name in (("auto", "AutoWatcher"), ("native", "NativeWatcher"), ("polling", "PollingWatcher")):
        assert type(make_watcher(mode, target(ws, []))).__name__ == name
