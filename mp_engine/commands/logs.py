"""`mp-engine logs`: the event log in readable lines, and `-f` that follows it across rotation.

Following keeps the open file descriptor of the file it reads. When the path names a new
file (the writer rotated it into SYSTEM/.engine/), the old descriptor is read to its end
first, so a line appended just before or during the rotation is still shown, and only
then is the new file opened from its start.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.config.cache import load_for_reading
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.terminal import escape_controls

FOLLOW_POLL = 0.25  # seconds between looks at the file while following


def render_event(raw: str) -> str:
    """`2026-11-22 15:16:00.123  mp_claimed          mp=MP-1.4 run=...` (raw text if not JSON)."""
    try:
        rec: dict[str, Any] = json.loads(raw)
    except ValueError:
        return raw
    ts = str(rec.pop("ts", "")).replace("T", " ").rstrip("Z")
    event = rec.pop("event", "?")
    fields = " ".join(f"{k}={_value(v)}" for k, v in rec.items())
    return f"{ts}  {event:<20} {fields}".rstrip()


def _value(v: Any) -> str:
    if isinstance(v, float):  # durations: `duration=0.0014` rather than 0.0014061360002415313
        v = float(f"{v:.4g}") if abs(v) < 1 else round(v, 3)
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False) if (" " in text or not text) else text


def rotated_files(path: Path, archive_dir: Path, keep: int) -> list[Path]:
    """The rotated logs that exist, oldest first."""
    found = [archive_dir / f"{path.name}.{n}" for n in range(keep, 0, -1)]
    return [p for p in found if p.exists()]


def last_lines(path: Path, n: int, older: list[Path] | None = None, upto: int | None = None) -> list[str]:
    """The last `n` lines of the log (of its first `upto` bytes, where `follow` takes over),
    reaching into rotated files (oldest first) if needed. Each file is read from its end,
    a block at a time, until it gave `n` lines: `logs -n 50` reads a few KiB of a 10 MiB
    log, not all of it (bench figure 25)."""
    lines: list[str] = []
    for p in [path, *reversed(older or [])]:
        lines = tail_of(p, n - len(lines), upto if p == path else None) + lines
        if len(lines) >= n:
            break
    return lines[-n:] if n > 0 else []


def tail_of(path: Path, n: int, upto: int | None = None, block: int = 64 * 1024) -> list[str]:
    """At least the last `n` non-blank lines of `path` (all it has when fewer), reading
    backwards from byte `upto` (the end when None)."""
    if n <= 0:
        return []
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return []
    with f:
        end = f.seek(0, os.SEEK_END) if upto is None else min(upto, f.seek(0, os.SEEK_END))
        start, data = end, b""
        while start > 0:
            start = max(0, start - block)
            f.seek(start)
            data = f.read(end - start)
            complete = data.split(b"\n", 1)[1] if start > 0 and b"\n" in data else data
            if start == 0 or sum(1 for ln in complete.splitlines() if ln.strip()) > n:
                break
            block *= 2
        if start > 0 and b"\n" in data:
            data = data.split(b"\n", 1)[1]  # the first line may be cut: it is not one of the last n
    return [ln for ln in data.decode("utf-8", errors="replace").splitlines() if ln.strip()]


def _open(path: Path):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        return None


def position(path: Path) -> tuple[int, int] | None:
    """(inode, size) of the log now: where `follow` starts after `last_lines` was shown."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size


def _newer_rotated(path: Path, archive_dir: Path | None, keep: int, ino: int) -> list[Any]:
    """Open files of the rotated logs newer than the one with inode `ino`, oldest first.

    Several rotations can happen between two looks (a burst of events): each file they
    produced must be read, not only the newest. All are opened at once, so a rotation
    while they are read renames them but cannot swap them.
    """
    if archive_dir is None:
        return []
    files = [f for f in (_open(p) for p in rotated_files(path, archive_dir, keep)) if f is not None]
    inodes = [os.fstat(f.fileno()).st_ino for f in files]
    newer = files[inodes.index(ino) + 1 :] if ino in inodes else []
    for f in files:
        if f not in newer:
            f.close()
    return newer


def follow(
    path: Path,
    emit: Callable[[str], None],
    stop: threading.Event,
    start: tuple[int, int] | None,
    *,
    archive_dir: Path | None = None,
    keep: int = 0,
) -> None:
    """Emit every line appended to `path` after `start` (from `position`) until `stop` is
    set, across rotations into `archive_dir` (`keep` files). A line written between
    `position` and the first read is shown, not skipped. Lines are lost only when the
    follower falls more than `keep` rotations behind."""
    f = _open(path)
    if f is not None and start is not None and os.fstat(f.fileno()).st_ino == start[0]:
        f.seek(start[1])
    buf = b""
    try:
        while not stop.is_set():
            if f is None:
                f = _open(path)
                if f is None:
                    stop.wait(FOLLOW_POLL)
                    continue
            data = f.read()
            if data:
                buf += data
                *complete, buf = buf.split(b"\n")
                for line in complete:
                    if line.strip():
                        emit(line.decode("utf-8", errors="replace"))
                continue
            if _replaced(path, f):
                # Rotated: read the old file to its end once more (a writer may have appended
                # between the empty read above and the rename), then switch to the new file.
                buf += f.read()
                ino = os.fstat(f.fileno()).st_ino
                f.close()
                for older in _newer_rotated(path, archive_dir, keep, ino):
                    with older:
                        buf += b"\n" + older.read()
                for line in buf.split(b"\n"):
                    if line.strip():
                        emit(line.decode("utf-8", errors="replace"))
                buf = b""
                f = _open(path)
                continue
            stop.wait(FOLLOW_POLL)
    finally:
        if f is not None:
            f.close()


def _replaced(path: Path, f: Any) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False  # between the rename and the next append: keep draining the old one
    return st.st_ino != os.fstat(f.fileno()).st_ino


def logs(root: Path, lines: int, follow_: bool, raw: bool, echo: Callable[[str], None]) -> ExitCode:
    ws, config, config_error = load_for_reading(root)
    if config_error:
        echo(f"warning: {config_error} (logs are shown with the default settings)")

    def show(line: str) -> None:
        echo(escape_controls(line if raw else render_event(line)))

    def show_now(line: str) -> None:
        show(line)
        sys.stdout.flush()

    older = rotated_files(ws.events_file, ws.local_dir, config.engine.events_keep)
    start = position(ws.events_file)  # before reading: a line written meanwhile is followed, not lost
    for line in last_lines(ws.events_file, lines, older, upto=start[1] if start else None):
        show(line)
    if follow_:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        sys.stdout.flush()
        follow(
            ws.events_file,
            show_now,
            stop,
            start,
            archive_dir=ws.local_dir,
            keep=config.engine.events_keep,
        )
    return ExitCode.OK
