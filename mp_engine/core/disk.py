"""The workspace's file system: which one it is, whether an error means it is full, and a
small reserve the engine frees to record a result when it is (issue #19)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

FULL = (errno.ENOSPC, errno.EDQUOT)


def is_full(exc: BaseException) -> bool:
    """True when `exc`, or an exception it was raised from, says the disk or quota is full."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in FULL:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def mount_of(path: Path, mounts: Path = Path("/proc/mounts")) -> tuple[str, str] | None:
    """(mount point, file-system type) of the mount holding `path` (longest prefix)."""
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return None
    best: tuple[str, str] | None = None
    target = str(path)
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and (
            best is None or len(point) >= len(best[0])
        ):
            best = (point, parts[2])
    return best


def used_fraction(path: Path) -> float | None:
    """How full the file system holding `path` is, as `df` counts it (blocks in use over
    those an unprivileged process can use), or None when it cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    used = st.f_blocks - st.f_bfree
    usable = used + st.f_bavail
    return used / usable if usable > 0 else None


def describe(path: Path) -> str:
    """`/srv (ext4, 12 KiB free)`, for a diagnosis."""
    mount = mount_of(path)
    try:
        st = os.statvfs(path)
        free = f"{st.f_bavail * st.f_frsize // 1024} KiB free"
    except OSError:
        free = "free space unknown"
    return f"{mount[0]} ({mount[1]}, {free})" if mount else f"the file system of {path} ({free})"


class Reserve:
    """A file of `size` bytes kept in SYSTEM/.engine/: when the disk fills, removing it gives
    the engine room to write the ERROR result, the state and the ledger."""

    def __init__(self, path: Path, size: int):
        self.path = path
        self.size = size

    def ensure(self) -> bool:
        """(Re)create the reserve if it is missing or short; False while there is no room."""
        if self.size <= 0:
            return True
        try:
            if self.path.stat().st_size >= self.size:
                return True
        except FileNotFoundError:
            pass
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "wb") as f:
                # Real blocks: a sparse file or fallocate on some file systems frees nothing.
                chunk = b"\0" * (64 * 1024)
                for _ in range(0, self.size, len(chunk)):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            return True
        except OSError as e:
            if not is_full(e):
                raise
            self.path.unlink(missing_ok=True)
            return False

    def release(self) -> int:
        """Remove the reserve; the bytes it frees."""
        try:
            size = self.path.stat().st_size
            self.path.unlink()
            return size
        except FileNotFoundError:
            return 0
