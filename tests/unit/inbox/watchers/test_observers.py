"""Real watchdog observers waking the real engine loop (in a thread).

The loop's rescan timer is set to 60 s here, so anything processed within a test's
deadline was woken by the observer, not by the timer.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator

import pytest

from mp_engine.config.load import load_config
from mp_engine.daemon.loop import Daemon
from mp_engine.inbox.watchers.auto import make_watcher
from mp_engine.inbox.watchers.native import NativeWatcher
from mp_engine.inbox.watchers.polling import PollingWatcher
from mp_engine.pipeline.engine import Engine
from tests.conftest import drop, events, read_state, wait_for

COUNTING_MP = "# MP-{n}.0\n\n```bash\necho run >> count-{n}.txt\n```\n"


class LoopThread:
    def __init__(self, engine: Engine, watcher_cls):
        self.engine = engine
        self.daemon = Daemon(engine)
        target = self.daemon.watch_target()
        watcher = watcher_cls(target) if watcher_cls else make_watcher(engine.config.watch.mode, target)
        self.watchers: list = [watcher]
        self.thread = threading.Thread(target=self.daemon.run, kwargs={"watcher": watcher}, daemon=True)

    def __enter__(self) -> LoopThread:
        self.thread.start()
        wait_for(lambda: self.watchers and self.watchers[0].observer is not None, what="the watcher to start")
        return self

    def __exit__(self, *exc) -> None:
        self.engine.stop.set()
        self.daemon.wake.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()


@pytest.fixture
def make_loop(ws, monkeypatch) -> Iterator:
    monkeypatch.setenv("MP_ENGINE_ENGINE__POLL_INTERVAL", "60")

    def make(watcher_cls=NativeWatcher, settle: float = 60) -> LoopThread:
        monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", str(settle))
        return LoopThread(Engine(ws, load_config(ws.root)), watcher_cls)

    yield make


def count(ws, n: int) -> int:
    path = ws.root / f"count-{n}.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def runs(ws) -> int:
    return len([p for p in ws.runs_dir.iterdir() if p.is_dir()])


def test_rename_into_place_is_processed_once(ws, make_loop):
    with make_loop():
        drop(ws, COUNTING_MP.format(n=1), how="rename")
        wait_for(lambda: read_state(ws)["last_completed"] == "MP-1.0", what="MP-1.0 to complete")
    assert count(ws, 1) == 1 and runs(ws) == 1


def test_slow_chunked_write_is_taken_only_after_close_and_once(ws, make_loop):
    text = COUNTING_MP.format(n=2)
    with make_loop():
        with open(ws.inbox_file, "w") as f:
            for i in range(0, len(text), 8):
                f.write(text[i : i + 8])
                f.flush()
                # The point of this test is a writer that is slow between chunks.
                time.sleep(0.02)
            assert runs(ws) == 0  # nothing is claimed while the writer still has it open
        wait_for(lambda: read_state(ws)["last_completed"] == "MP-2.0", what="MP-2.0 to complete")
    assert count(ws, 2) == 1 and runs(ws) == 1


def test_files_dropped_while_down_are_processed_at_startup(ws, make_loop):
    drop(ws, COUNTING_MP.format(n=3))
    os.utime(ws.inbox_file, (time.time() - 3600, time.time() - 3600))  # written long ago
    with make_loop(settle=1):
        wait_for(lambda: read_state(ws)["last_completed"] == "MP-3.0", what="MP-3.0 to complete")
    assert count(ws, 3) == 1


def test_polling_watcher_uses_the_settle_window(ws, make_loop):
    with make_loop(PollingWatcher, settle=0.3):
        drop(ws, COUNTING_MP.format(n=4), how="write")
        wait_for(lambda: read_state(ws)["last_completed"] == "MP-4.0", what="MP-4.0 to complete")
    assert count(ws, 4) == 1


def test_dead_observer_is_restarted(ws, make_loop):
    with make_loop() as loop:
        first = loop.watchers[0].observer
        first.stop()
        first.join(timeout=10)
        wait_for(lambda: events(ws, "watcher_restarted"), what="the watcher to be restarted")
        wait_for(lambda: loop.watchers[0].observer is not None and loop.watchers[0].observer.is_alive())
        drop(ws, COUNTING_MP.format(n=5))
        wait_for(lambda: read_state(ws)["last_completed"] == "MP-5.0", what="MP-5.0 after restart")


def test_inbox_deleted_and_recreated_is_watched_again(ws, make_loop):
    with make_loop() as loop:
        shutil.rmtree(ws.inbox_dir)
        ws.inbox_dir.mkdir(exist_ok=True)  # the engine may have recreated it already
        wait_for(lambda: events(ws, "watcher_restarted"), what="the watcher to notice the new inbox")
        wait_for(lambda: loop.watchers[0].healthy(), what="the watcher to watch the new inbox")
        drop(ws, COUNTING_MP.format(n=6))
        wait_for(lambda: read_state(ws)["last_completed"] == "MP-6.0", what="MP-6.0 in the new inbox")
    assert count(ws, 6) == 1


def test_inbox_deleted_is_recreated_by_the_loop(ws, make_loop):
    with make_loop() as loop:
        shutil.rmtree(ws.inbox_dir)
        wait_for(lambda: events(ws, "inbox_recreated"), what="the inbox to be recreated")
        wait_for(lambda: events(ws, "watcher_restarted"), what="the watcher to follow it")
        wait_for(lambda: loop.watchers[0].healthy(), what="the watcher to watch the new inbox")
        drop(ws, COUNTING_MP.format(n=7))
        wait_for(lambda: read_state(ws)["last_completed"] == "MP-7.0", what="MP-7.0 in the recreated inbox")


def test_auto_mode_is_native_on_linux(ws):
    watcher = make_watcher("auto", Daemon(Engine(ws, load_config(ws.root))).watch_target())
    watcher.start()
    try:
        assert watcher.mode == "native" and watcher.healthy()
    finally:
        watcher.stop()
