"""The only way mp-engine writes a file that someone else may read.

`atomic_write` writes a temp file in the same directory, fsyncs it, renames it over the
target with `os.replace` and fsyncs the directory, so a reader sees the old content or the
new one, never a torn file, and a power cut after return cannot undo the rename.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from mp_engine.core.pids import pid_alive

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

TEMP_MARKER = ".mpe-tmp-"


def is_temp_name(name: str) -> bool:
    """True for the names of our own in-flight temp files (watchers ignore them)."""
    return TEMP_MARKER in name


def fsync_dir(directory: Path) -> None:
    """Make a rename or unlink inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: Path,
    data: bytes | str | Iterable[bytes],
    *,
    mode: int = 0o644,
    durable: bool = True,
    dir_fd: int | None = None,
    dir_sync: bool = True,
) -> None:
    """Replace `path` with `data` atomically and (unless `durable=False`) durably. `data`
    may be an iterable of byte chunks (a stream rewritten in bounded memory); if it raises,
    the target is untouched.

    A reader sees the old bytes or the new ones, never a mix. `durable=False` skips the two
    fsyncs: the rename is still atomic, and the write survives a `kill -9` (the page cache
    does), but not a power loss until `make_durable()` runs on the path. With `dir_fd`,
    `path` is a name inside that open directory, and nothing is resolved by path again
    (`Workspace.write_confined`: no symlink can be swapped in between check and write).
    `dir_sync=False` (with `durable`) fsyncs the content but not the directory: after a
    power loss the file holds the old bytes or the new ones, never a torn or empty file,
    but the replacement itself may be undone (for a write the next durable one covers).
    """
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    tmp_name = f".{path.name}{TEMP_MARKER}{os.getpid()}-{os.urandom(4).hex()}"
    tmp: str | Path = tmp_name if dir_fd is not None else path.parent / tmp_name
    dest: str | Path = path.name if dir_fd is not None else path
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode, dir_fd=dir_fd)
    try:
        try:
            for chunk in [data] if isinstance(data, bytes) else data:
                view = memoryview(chunk)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, dest, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    if durable and dir_sync:
        if dir_fd is not None:
            os.fsync(dir_fd)
        else:
            fsync_dir(path.parent)


def atomic_write_json(path: Path, obj: Any, *, durable: bool = True, dir_sync: bool = True) -> None:
    """`atomic_write` of `obj` as indented, key-sorted JSON with a final newline."""
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write(path, text, durable=durable, dir_sync=dir_sync)


def atomic_link(source: Path, path: Path) -> bool:
    """Replace `path` with a hard link to `source` (a link under a temp name, renamed over
    `path`: a reader sees the old file or the new one): the same bytes, with nothing to
    write and nothing to fsync but the directory. False where the file system has no hard
    links (the caller writes a copy)."""
    path = Path(path)
    tmp = path.parent / f".{path.name}{TEMP_MARKER}{os.getpid()}-{os.urandom(4).hex()}"
    try:
        os.link(source, tmp)
    except OSError:
        return False
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return True


def fsync_file(path: Path) -> None:
    """fsync one file's content (not its directory entry)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_durable(*paths: Path) -> None:
    """fsync each file or directory, then each parent directory once (after non-durable
    writes): not again a directory that was among the paths (its entries are durable)."""
    synced: dict[Path, None] = {}
    parents: dict[Path, None] = {}
    for path in paths:
        fsync_file(path)
        synced[Path(path)] = None
        parents[Path(path).parent] = None
    for parent in parents:
        if parent not in synced:
            fsync_dir(parent)


def append_durable(path: Path, line: str, *, durable: bool = True) -> int:
    """Append one line (a newline is added) with O_APPEND and (unless `durable=False`) fsync
    it; return the file's size afterwards."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _writer_alive(name: str) -> bool:
    """True when the process that named this temp file may still be writing it.

    Another engine on the same root (a second daemon, `approve`, `status`) may be between
    its open() and its rename(); only a dead writer's temp file is debris.
    """
    pid_text = name.rsplit(TEMP_MARKER, 1)[1].split("-", 1)[0]
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    return pid != os.getpid() and pid_alive(pid)


def sweep_temp_files(directory: Path) -> list[Path]:
    """Remove temp files a crashed writer left behind in `directory`; return what was removed."""
    removed: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return removed
    for entry in entries:
        if is_temp_name(entry.name) and not entry.is_dir() and not _writer_alive(entry.name):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, streamed; "" if it cannot be read."""
    import hashlib  # lazy: `status` imports this module and never hashes (bench figure 8)

    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return ""
    return h.hexdigest()


def read_tail(path: str | os.PathLike[str], cap: int) -> str:
    """The last `cap` bytes of a file as text ("" if it does not exist)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > cap:
                f.seek(size - cap)
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
