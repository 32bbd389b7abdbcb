"""The inbox: `Claude_Inbox/incoming_microproject.txt`, seen from the directory itself.

Watcher events only leave hints here ("a writer closed the file", "a file was renamed
into place"); every decision is made by `scan()` from `lstat`, so a missed, duplicated
or early event does no harm. A file is *ready* when it was closed after writing or
renamed into place and has not changed since, or when its size and mtime have been
stable for `settle_seconds`.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mp_engine.core.errors import InvalidMPError
from mp_engine.core.workspace import Workspace
from mp_engine.inbox.header import sha256_hex
from mp_engine.inbox.kinds import EntryKind, entry_kind
from mp_engine.inbox.queue import SEEN, MPQueue

# The engine renames a finished MP aside to this name (plus the run id) inside the inbox
# before deciding whether to delete it; watchers ignore it, and only the engine removes it.
CLAIMED_PREFIX = ".mpe-claimed-"


@dataclass(frozen=True)
class Signature:
    """What identifies one version of the inbox entry."""

    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Signature:
        return cls(st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class Entry:
    path: Path
    kind: EntryKind
    sig: Signature


@dataclass(frozen=True)
class Scan:
    entry: Entry | None
    ready: bool = False
    wait_until: float | None = None  # monotonic time at which to look again


class Inbox:
    """Decides whether the inbox holds a complete MP, and reads it safely."""

    def __init__(
        self,
        ws: Workspace,
        settle_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        max_bytes: int = 1024 * 1024,
    ):
        self.ws = ws
        self.path = ws.inbox_file
        self.settle = settle_seconds
        self.max_bytes = max_bytes
        self.queue = MPQueue(ws.local_dir / "queue")
        self.busy_sha: str | None = None  # the MP being run, while one is
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self._complete_marks: set[Signature] = set()
        self._observed: tuple[Signature, float] | None = None

    def lstat_entry(self) -> Entry | None:
        try:
            st = os.lstat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return Entry(self.path, entry_kind(st.st_mode), Signature.of(st))

    def note_complete(self) -> None:
        """Hint from a watcher: a writer closed the file, or it was renamed into place.
        While an MP runs, a complete version other than the running one is queued as
        `seen` at once: replaced before the engine is free, it still gets a result."""
        entry = self.lstat_entry()
        if entry is not None and entry.kind is EntryKind.FILE:
            with self._lock:
                self._complete_marks = {entry.sig}
            if self.busy_sha is not None:
                data = self.waiting_bytes()
                if data is not None:
                    self.queue.add(data, SEEN)

    def run_started(self, sha256: str, *, from_slot: bool = True) -> None:
        """An MP with these bytes was claimed: forget the slot's hints (when it came from
        the slot), and queue what arrives while it runs. A version a watcher saw complete
        while the claim was written (RUNNING is published first, so an orchestrator may
        send the next one then) is queued now: its hint came before `busy_sha` was set, and
        forgetting it would let the version vanish if it were replaced before its turn."""
        with self._lock:
            marks = set(self._complete_marks)
        if from_slot:
            self.forget()
        self.busy_sha = sha256
        self.queue.discard_seen(sha256)
        entry = self.lstat_entry()
        if entry is not None and entry.kind is EntryKind.FILE and entry.sig in marks:
            data = self.waiting_bytes()  # None for the claimed MP itself
            if data is not None:
                self.queue.add(data, SEEN)

    def run_ended(self) -> None:
        self.busy_sha = None

    def waiting_bytes(self) -> bytes | None:
        """The slot's bytes when it holds a regular file that is not the MP running (and
        within the size cap); None otherwise."""
        entry = self.lstat_entry()
        if entry is None or entry.kind is not EntryKind.FILE:
            return None
        try:
            data = self.read(entry, self.max_bytes)
        except (InvalidMPError, OSError):
            return None
        if data is None or sha256_hex(data) == self.busy_sha:
            return None
        return data

    def scan(self) -> Scan:
        entry = self.lstat_entry()
        if entry is None:
            with self._lock:
                self._observed = None
                self._complete_marks.clear()
            return Scan(None)
        if entry.kind is not EntryKind.FILE:
            return Scan(entry, ready=True)  # bad input: nothing to wait for
        now = self._monotonic()
        with self._lock:
            if entry.sig in self._complete_marks or self.settle <= 0:
                return Scan(entry, ready=True)
            age = self._wall() - entry.sig.mtime_ns / 1e9
            if 0 <= age and age >= self.settle:
                return Scan(entry, ready=True)
            if self._observed is None or self._observed[0] != entry.sig:
                self._observed = (entry.sig, now)
            first_seen = self._observed[1]
            if now - first_seen >= self.settle:
                return Scan(entry, ready=True)
            wait = first_seen + self.settle
            if 0 <= age:
                wait = min(wait, now + (self.settle - age))
            return Scan(entry, ready=False, wait_until=wait)

    def read(self, entry: Entry, max_bytes: int) -> bytes | None:
        """The entry's bytes, or None if it changed while being read (look again later).

        Raises `InvalidMPError` for entries that can never be an MP: a symlink, a
        directory, a device or FIFO, or a file over the size cap.
        """
        rel = self.ws.rel(entry.path)
        if entry.kind is EntryKind.SYMLINK:
            target = os.readlink(entry.path)
            raise InvalidMPError(
                f"{rel} is a symlink (to {target!r}); mp-engine never follows links in the inbox",
                f"Replace the link with a regular file holding the MP: `cp --remove-destination {target} {rel}`.",
            )
        if entry.kind is EntryKind.DIRECTORY:
            raise InvalidMPError(
                f"{rel} is a directory, not a file",
                f"Remove the directory and write the MP as a regular file at {rel}.",
            )
        if entry.kind is EntryKind.OTHER:
            raise InvalidMPError(
                f"{rel} is not a regular file (a FIFO, socket or device)",
                f"Remove it and write the MP as a regular file at {rel}.",
            )
        if entry.sig.size > max_bytes:
            raise InvalidMPError(
                f"the MP file is {entry.sig.size} bytes, over the {max_bytes}-byte cap",
                "Split the work into smaller MPs, or raise `[engine] max_mp_bytes` in mp-engine.toml.",
            )
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:  # swapped for a symlink since the lstat
                return None
            raise
        try:
            before = os.fstat(fd)
            if Signature.of(before) != entry.sig:
                return None
            chunks = []
            remaining = max_bytes + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        if Signature.of(after) != entry.sig:
            return None
        return b"".join(chunks)

    def forget(self) -> None:
        """Drop hints about a file that has been consumed."""
        with self._lock:
            self._observed = None
            self._complete_marks.clear()
