"""The workspace lock: one engine at a time claims, runs and records an MP.

A `filelock.FileLock` (flock on Unix, released by the kernel when the holder dies, so a
stale RUNNING state with a free lock means the previous holder crashed). It is acquired in
short slices so a stop request is honoured while waiting, logs once when it has to wait,
and records who holds it in `SYSTEM/.engine/lock.owner` for `status` and error messages.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog
from filelock import FileLock, Timeout

from mp_engine.clock import now_iso
from mp_engine.errors import LockTimeout

log = structlog.get_logger("mp_engine.lock")


class WorkspaceLock:
    def __init__(self, path: Path, timeout: float, stop: threading.Event | None = None):
        self.path = Path(path)
        self.owner_path = self.path.with_name("lock.owner")
        self.timeout = timeout
        self.stop = stop
        self._lock = FileLock(str(self.path))
        self._host = socket.gethostname()

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def owner(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.owner_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None

    def _write_owner(self, purpose: str) -> None:
        """Record the holder, in place and without fsync: it is advisory (messages only), only
        the holder writes it, and a reader that catches it half-written just says "unknown".
        The file is kept between holds and emptied on release: rewriting an existing file
        costs a fraction of creating one, and the loop takes the lock on every pass."""
        data = json.dumps({"pid": os.getpid(), "host": self._host, "since": now_iso(), "purpose": purpose})
        fd = os.open(self.owner_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)

    @contextmanager
    def hold(self, purpose: str, timeout: float | None = None) -> Iterator[None]:
        """Hold the lock for `purpose`; raise `LockTimeout` after `timeout` seconds."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        announced = False
        while True:
            try:
                self._lock.acquire(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
                break
            except Timeout:
                owner = self.owner()
                if not announced:
                    log.info("waiting for workspace lock", purpose=purpose, holder=owner)
                    announced = True
                if time.monotonic() >= deadline or (self.stop is not None and self.stop.is_set()):
                    who = (
                        f"pid {owner.get('pid')} on {owner.get('host')} ({owner.get('purpose')}) since {owner.get('since')}"
                        if owner
                        else "another engine"
                    )
                    raise LockTimeout(
                        f"the workspace lock {self.path} is held by {who}; gave up after {limit:g} s. "
                        "That engine will finish its MP first; if no engine is running, check `mp-engine status`."
                    ) from None
        outermost = self._lock.lock_counter == 1
        try:
            if outermost:
                self._write_owner(purpose)
            yield
        finally:
            if outermost:
                try:
                    os.truncate(self.owner_path, 0)  # empty: nobody holds it
                except FileNotFoundError:
                    pass
            self._lock.release()
