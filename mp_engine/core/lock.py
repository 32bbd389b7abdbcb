"""The workspace lock: one engine at a time claims, runs and records an MP.

A `filelock.FileLock` (flock on Unix, released by the kernel when the holder dies, so a
stale RUNNING state with a free lock means the previous holder crashed). It is acquired in
short slices so a stop request is honoured while waiting, logs once when it has to wait,
and records who holds it in `SYSTEM/.engine/lock.owner` for `status` and error messages.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.core.atomic import atomic_write_json, sha256_file
from mp_engine.core.clock import now_iso
from mp_engine.core.errors import DaemonRunning, LockTimeout
from mp_engine.core.pids import hostname

if TYPE_CHECKING:
    from filelock import FileLock

# filelock and structlog are imported by the lock holders, not at import: `status` reads
# the owner records and probes `daemon.lock` without them (bench figure 8).


def _filelock(path: Path) -> FileLock:
    from filelock import FileLock

    return FileLock(str(path))


class WorkspaceLock:
    def __init__(self, path: Path, timeout: float, stop: threading.Event | None = None):
        self.path = Path(path)
        self.owner_path = self.path.with_name("lock.owner")
        self.timeout = timeout
        self.stop = stop
        self._file_lock: FileLock | None = None
        self._host = hostname()

    @property
    def _lock(self) -> FileLock:
        """Made on first use: reading `owner()` (what `status` does) needs no filelock."""
        if self._file_lock is None:
            self._file_lock = _filelock(self.path)
        return self._file_lock

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
        import structlog
        from filelock import Timeout

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
                    structlog.get_logger("mp_engine.core.lock").info(
                        "waiting for workspace lock", purpose=purpose, holder=owner
                    )
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


class DaemonLock:
    """`SYSTEM/.engine/daemon.lock`, held by `mp-engine run` for its whole life: a second
    daemon on the workspace stops at once, naming the first (`daemon.owner` beside it),
    instead of starting beside it and overwriting the state's record of who runs."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.owner_path = self.path.with_name("daemon.owner")
        self._lock = _filelock(self.path)

    def acquire(self, config_file: Path | None = None, mode: str = "daemon") -> None:
        """Take the lock or raise `DaemonRunning`; record who holds it, and the digest of
        the configuration it started with (`status` says "restart to apply" when the file
        changes under a running daemon)."""
        from filelock import Timeout

        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # Not 0: `daemon_alive` probes with a shared lock for a moment; a start that
            # meets that probe waits for it rather than mistaking it for a daemon.
            self._lock.acquire(timeout=1.0)
        except Timeout:
            o = daemon_owner(self.path)
            who = (
                f"pid {o.get('pid')} on {o.get('host')}, started {o.get('started_at')}"
                if o
                else "a process that has not recorded itself yet"
            )
            raise DaemonRunning(
                f"another mp-engine daemon already runs on this workspace ({who}). Stop it first "
                "(`systemctl stop mp-engine`, or `kill` that pid), or give this one another --root."
            ) from None
        data = {"pid": os.getpid(), "host": hostname(), "started_at": now_iso(), "mode": mode}
        if config_file is not None:
            data["config_sha256"] = sha256_file(config_file)
        atomic_write_json(self.owner_path, data, durable=False)

    def release(self) -> None:
        if self._lock.is_locked:
            self.owner_path.unlink(missing_ok=True)
            self._lock.release()


def daemon_alive(path: Path) -> bool | None:
    """Whether a daemon holds `daemon.lock` now (None: this system cannot tell). A shared
    `flock` held for an instant: free means no daemon, refused means one runs."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not Unix
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # closing drops the shared lock, if we got it
    return False


def daemon_owner(path: Path) -> dict[str, Any] | None:
    """What the running daemon recorded of itself (`daemon.owner`: pid, host, start)."""
    try:
        return json.loads(path.with_name("daemon.owner").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
