"""Lock files a killed git left behind (`index.lock`, `HEAD.lock`, `refs/heads/main.lock`,
`packed-refs.lock`, `config.lock`, ...): while one exists, every git command that needs
that file fails. A lock is stale when no process has it open: git holds a lock file open
from the moment it creates it until it renames or removes it (lockfile.c), so a lock
nobody holds open belongs to a process that is gone. Issue #19.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from mp_engine.sync.context import SyncContext

# git's words when a lock is in the way: "Unable to create '/w/.git/HEAD.lock': File
# exists." and "cannot lock ref 'refs/heads/main': ... 'refs/heads/main.lock': File exists".
LOCK_ERROR_RE = re.compile(r"\.lock'?:? File exists|cannot lock ref|Unable to create '[^']+\.lock'", re.I)
SKIP_DIRS = {"objects", "lfs", "logs"}  # large, and git takes no lock there that blocks the engine


def is_lock_error(message: str) -> bool:
    return bool(LOCK_ERROR_RE.search(message))


def open_paths() -> set[str]:
    """Every path some process on this host has open (one pass over /proc)."""
    found: set[str] = set()
    if not os.path.isdir("/proc"):
        return found
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                try:
                    found.add(os.readlink(f"{fd_dir}/{fd}"))
                except OSError:
                    continue
        except OSError:
            continue
    return found


def stale_locks(git_dirs: Iterable[Path]) -> list[Path]:
    """`*.lock` files under the git directories that no process holds open."""
    candidates: list[Path] = []
    for git_dir in {Path(d) for d in git_dirs}:
        for dirpath, dirnames, filenames in os.walk(git_dir):
            if Path(dirpath) == git_dir:
                dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            candidates += [Path(dirpath) / f for f in filenames if f.endswith(".lock")]
    if not candidates:
        return []
    held = open_paths()
    return sorted(p for p in candidates if str(p) not in held)


def remove_stale_locks(sync: SyncContext, git_dirs: Iterable[Path]) -> list[str]:
    """Remove the stale locks; one `git_recovered` event each. Returns what was removed."""
    removed = []
    for lock in stale_locks(git_dirs):
        try:
            lock.unlink()
        except FileNotFoundError:  # its git finished meanwhile
            continue
        rel = os.path.relpath(lock, sync.ws.root)
        removed.append(rel)
        sync.events.emit("git_recovered", what="stale lock removed", path=rel)
    return removed
