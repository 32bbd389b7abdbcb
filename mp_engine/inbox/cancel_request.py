"""Cancel requests: where they come from, what they name, and watching for one while an MP runs.

A request names one MP by id on its first line. It arrives three ways:
- `Claude_Inbox/cancel_request.txt`, committed by the orchestrator (`mp-engine send
  --cancel`) and pulled, or dropped by hand: source `inbox`;
- `SYSTEM/.engine/cancel_request`, written by `mp-engine cancel` on the engine host
  (host-local, never committed): source `host`;
- while an MP runs, the git channel also looks at the remote branch itself (the engine
  does not pull in the middle of a run): source `remote`.

`CancelWatch` is the thread that looks while a run goes on. When a request names the
running MP it sets `cancelled` and the engine's stop-now event (which stops the running
step's process group at once) and remembers the request; drive.py turns the stopped run into a
CANCELLED result. A request is consumed (its file removed) when it has had its effect or
when it names nothing that can be cancelled; the effect is recorded either way.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mp_engine.core.atomic import atomic_write
from mp_engine.core.workspace import INBOX_DIR, Workspace
from mp_engine.inbox.header import MP_ID_RE

CANCEL_FILE = "cancel_request.txt"  # in Claude_Inbox/
CANCEL_PATH = f"{INBOX_DIR}/{CANCEL_FILE}"  # as git names it
HOST_FILE = "cancel_request"  # in SYSTEM/.engine/
MAX_BYTES = 4096
T = TypeVar("T")
LOCAL_EVERY = 0.1  # seconds between looks at the two files while an MP runs


@dataclass(frozen=True)
class CancelRequest:
    mp_id: str
    source: str  # "inbox", "host" or "remote"
    path: Path | None  # the file that holds it (None: only on the remote so far)

    @property
    def who(self) -> str:
        return {
            "host": "`mp-engine cancel` on the engine host",
            "inbox": f"Claude_Inbox/{CANCEL_FILE}",
            "remote": f"Claude_Inbox/{CANCEL_FILE} on the remote",
        }[self.source]


WRITE_GRACE = 2.0  # seconds a request file naming no MP may still be being written


def parse_request(data: bytes) -> str | None:
    """The MP id on the first non-blank line, or None when there is none."""
    for line in data[:MAX_BYTES].decode("utf-8", errors="replace").splitlines():
        word = line.strip().split(" ", 1)[0] if line.strip() else ""
        if word:
            return word if MP_ID_RE.match(word) else None
    return None


def inbox_path(ws: Workspace) -> Path:
    return ws.inbox_dir / CANCEL_FILE


def host_path(ws: Workspace) -> Path:
    return ws.local_dir / HOST_FILE


def _read(path: Path, source: str) -> CancelRequest | None | str:
    """The request in `path`; None when there is no file; "" for a file naming no MP."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError:
        return ""
    mp_id = parse_request(data)
    if mp_id:
        return CancelRequest(mp_id, source, path)
    # A file naming no MP may be one still being written (created empty, then filled):
    # it counts as naming nothing only once it has been left alone for a moment.
    try:
        settled = time.time() - os.stat(path).st_mtime >= WRITE_GRACE
    except OSError:
        return None
    return "" if settled else None


def pending(ws: Workspace) -> tuple[list[CancelRequest], list[Path]]:
    """The requests waiting in the workspace, and the request files that name no MP."""
    found, unreadable = [], []
    for path, source in ((host_path(ws), "host"), (inbox_path(ws), "inbox")):
        req = _read(path, source)
        if isinstance(req, CancelRequest):
            found.append(req)
        elif req == "":
            unreadable.append(path)
    return found, unreadable


def requested(ws: Workspace) -> bool:
    """Whether a request file exists (two `lstat`s: cheap enough for every pass)."""
    return os.path.lexists(host_path(ws)) or os.path.lexists(inbox_path(ws))


def request_on_host(ws: Workspace, mp_id: str) -> Path:
    """What `mp-engine cancel` writes; the running daemon sees it within `LOCAL_EVERY`."""
    ws.local_dir.mkdir(parents=True, exist_ok=True)
    path = host_path(ws)
    atomic_write(path, f"{mp_id}\n")
    return path


def consume(req: CancelRequest) -> None:
    if req.path is not None:
        req.path.unlink(missing_ok=True)


def consumed(req: CancelRequest, publish: Callable[[], T]) -> T:
    """Consume `req` around publishing its effect: a request in the inbox before (its
    removal travels in the result commit), the host's after (`mp-engine cancel` waits for
    the file to go, then reads the result)."""
    if req.source != "host":
        consume(req)
    try:
        return publish()
    finally:
        consume(req)


class CancelWatch:
    """While MP `mp_id` runs: look for a request naming it; when one comes, set
    `cancelled` and `stop_now`.

    `remote` (the git channel's look at the remote branch, or None) is called every
    `remote_every` seconds; a failure there is the channel's to report and is ignored."""

    def __init__(
        self,
        ws: Workspace,
        mp_id: str,
        stop_now: threading.Event,
        remote: Callable[[], bytes | None] | None = None,
        remote_every: float = 10.0,
    ):
        self.ws, self.mp_id, self.stop_now = ws, mp_id, stop_now
        self.cancelled = threading.Event()
        self.remote, self.remote_every = remote, remote_every
        self.request: CancelRequest | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"cancel-watch {mp_id}", daemon=True)

    def __enter__(self) -> CancelWatch:
        self.check_local()  # a request that came with the MP, or before the run resumed
        if self.request is None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def check_local(self) -> bool:
        found, _ = pending(self.ws)
        for req in found:
            if req.mp_id == self.mp_id:
                return self._hit(req)
        return False

    def _hit(self, req: CancelRequest) -> bool:
        self.request = req
        self.cancelled.set()
        self.stop_now.set()
        return True

    def _watch(self) -> None:
        next_remote = time.monotonic() + LOCAL_EVERY
        while not self._done.wait(LOCAL_EVERY):
            if self.check_local():
                return
            if self.remote is not None and time.monotonic() >= next_remote:
                next_remote = time.monotonic() + self.remote_every
                try:
                    data = self.remote()
                except Exception:  # noqa: BLE001 - the channel reports its own failures
                    data = None
                if data is not None and parse_request(data) == self.mp_id:
                    self._hit(CancelRequest(self.mp_id, "remote", None))
                    return
