"""The workspace lock: one holder, who it is, and a timeout that names it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from mp_engine.core.errors import LockTimeout
from mp_engine.core.lock import WorkspaceLock
from tests.conftest import wait_for

HOLD = """
import sys, time
from pathlib import Path
from mp_engine.core.lock import WorkspaceLock
with WorkspaceLock(Path(sys.argv[1]), 5).hold("test holder"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def holder(ws):
    """Another process holding the lock (what a second engine would be)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(ws.lock_file)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


def test_the_owner_is_recorded_while_held_and_cleared_after(ws):
    lock = WorkspaceLock(ws.lock_file, 1)
    with lock.hold("tick"):
        owner = lock.owner()
        assert owner["pid"] == os.getpid() and owner["purpose"] == "tick"
        with lock.hold("nested"):  # re-entrant within the holder
            assert lock.owner()["purpose"] == "tick"
    assert lock.owner() is None


def test_a_timeout_names_the_holder(ws, holder):
    with pytest.raises(LockTimeout) as e:
        with WorkspaceLock(ws.lock_file, 0.3).hold("tick"):
            pass
    assert f"pid {holder.pid}" in str(e.value) and "test holder" in str(e.value)


def test_a_stop_ends_the_wait_early(ws, holder):
    stop = threading.Event()
    lock = WorkspaceLock(ws.lock_file, 60, stop=stop)
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            with lock.hold("tick"):
                pass
        except LockTimeout as e:
            failed.append(e)

    t = threading.Thread(target=wait)
    t.start()
    stop.set()
    t.join(timeout=10)
    assert not t.is_alive() and failed


def test_the_lock_is_free_again_when_its_holder_dies(ws, holder):
    holder.kill()
    holder.wait()
    wait_for(lambda: _try(ws), what="the lock to be free")


def _try(ws) -> bool:
    try:
        with WorkspaceLock(ws.lock_file, 0.2).hold("after"):
            return True
    except LockTimeout:
        return False
