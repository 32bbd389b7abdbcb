"""The event log: the host's flight recorder, `SYSTEM/.engine/events.jsonl`.

Every state transition and every stage's notable moment is appended as one JSON line
with a timestamp (O_APPEND; fsynced when an MP ends), and mirrored to the structured log.
While a run is active each line also goes to the run's own `events.jsonl` (`tee`), which
travels by git with the run; the host's log never does.

The daemon rotates the log at a size bound (`[engine] events_max_bytes`): under the
writer's lock and an flock shared by every process on the workspace, the file is renamed to
`SYSTEM/.engine/events.jsonl.1` (older ones shift up, `events_keep` are kept). A writer in
another process that opened the file just before the rename appends to the renamed file,
so no line is lost; `mp-engine logs -f` drains the old file before it follows the new one.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from mp_engine.core.atomic import append_durable, fsync_dir, make_durable
from mp_engine.core.clock import now_iso
from mp_engine.core.disk import is_full

log = structlog.get_logger("mp_engine")


class EventLog:
    """Append-only JSON-lines log; `redact` scrubs each line before it is written."""

    def __init__(self, path: Path, redact: Callable[[str], str] | None = None):
        self.path = Path(path)
        self.redact = redact or (lambda text: text)
        self._lock = threading.Lock()
        # Called with each record after it is written (metrics, the service supervisor).
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.max_bytes = 0  # 0: never rotate (only the daemon rotates; see `rotate_at`)
        self.keep = 5
        self.archive_dir: Path | None = None
        # Lines are appended without fsync: the log is a record of what happened, not the
        # state recovery reads (the ledger and SESSION_STATE.json are, and they are fsynced),
        # and an fsync per line cost more than the rest of an MP's bookkeeping. The page
        # cache keeps every line through a `kill -9`; `sync()` makes them survive a power
        # loss, and the engine calls it once per finished MP and on shutdown. True: fsync
        # each line.
        self.durable = False
        # While a run is active the engine points this at the run's own `events.jsonl` in
        # its archive, and every line is appended there too: that copy travels by git with
        # the run, bounded by the run, while this log stays on the host (committing it made
        # every commit and push grow with the log, up to its rotation bound).
        self.tee: Path | None = None
        # The log file whose directory entry is durable: one found at start was made so by
        # the first `sync` of the engine that created it (one that crashed before that
        # leaves an entry a power loss may take, and with it a record, never state).
        self._synced_ino = self._inode()

    def _inode(self) -> int:
        try:
            return os.stat(self.path).st_ino
        except OSError:
            return -1

    def rotate_at(self, max_bytes: int, keep: int, archive_dir: Path) -> None:
        """Rotate into `archive_dir` before a line would take the file past `max_bytes`."""
        self.max_bytes, self.keep, self.archive_dir = max_bytes, keep, Path(archive_dir)

    def rotated(self) -> list[Path]:
        """Rotated files that exist, newest first."""
        if self.archive_dir is None:
            return []
        found = (self.archive_dir / f"{self.path.name}.{n}" for n in range(1, self.keep + 1))
        return [p for p in found if p.exists()]

    def _rotate_if_full(self, incoming: int) -> None:
        """Called under `_lock`. The flock serialises rotation across processes; the size is
        read again once it is held, because another engine may have rotated meanwhile."""
        try:
            if os.stat(self.path).st_size + incoming <= self.max_bytes:
                return
        except FileNotFoundError:
            return
        assert self.archive_dir is not None
        self.archive_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.archive_dir / "events.rotate.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                return
            if size == 0 or size + incoming <= self.max_bytes:
                return
            name = self.path.name
            for n in range(self.keep - 1, 0, -1):
                older = self.archive_dir / f"{name}.{n}"
                if older.exists():
                    os.replace(older, self.archive_dir / f"{name}.{n + 1}")
            os.replace(self.path, self.archive_dir / f"{name}.1")
            if not self.durable:  # lines batched without fsync must not be lost with the old file
                make_durable(self.archive_dir / f"{name}.1")
            fsync_dir(self.archive_dir)
            fsync_dir(self.path.parent)
        finally:
            os.close(fd)  # releases the flock

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"ts": now_iso(), "event": event, **{k: v for k, v in fields.items() if v is not None}}
        line = self.redact(json.dumps(record, ensure_ascii=False, default=str, sort_keys=False))
        with self._lock:
            if self.max_bytes:
                self._rotate_if_full(len(line.encode("utf-8")) + 1)
            try:
                try:
                    append_durable(self.path, line, durable=self.durable)
                except FileNotFoundError:  # SYSTEM/ removed under a running engine: recreate it
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    append_durable(self.path, line, durable=self.durable)
            except OSError as e:
                if not is_full(e):
                    raise
                # A full disk must not take the engine down from inside an error handler:
                # the line goes to stderr (the journal) only (issue #19).
                log.warning("event log not written: the disk is full", lost_event=event)
            if self.tee is not None:
                try:
                    append_durable(self.tee, line, durable=False)
                except FileNotFoundError:  # the run directory is gone (removed by hand)
                    self.tee = None
        log.info(event, **{k: v for k, v in json.loads(line).items() if k not in ("ts", "event")})
        for listener in list(self.listeners):
            try:
                listener(record)
            except Exception:  # an observer must never break the engine's record keeping
                log.exception("event listener failed", listener=repr(listener), for_event=event)
        return record

    def sync(self) -> None:
        """fsync the log (after appends made with `durable = False`); its directory too
        the first time, and again only for a new file (a rotation, by any engine)."""
        with self._lock:
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            try:
                os.fsync(fd)
                ino = os.fstat(fd).st_ino
            finally:
                os.close(fd)
            if ino != self._synced_ino:
                fsync_dir(self.path.parent)
                self._synced_ino = ino

    def read(self) -> list[dict[str, Any]]:
        """All events, oldest first (used by tests and `status`)."""
        if not self.path.exists():
            return []
        out = []
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                out.append(json.loads(raw))
        return out
