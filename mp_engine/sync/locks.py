"""Lock files a killed git left behind (`index.lock`, `HEAD.lock`, `refs/heads/main.lock`,
`packed-refs.lock`, `config.lock`, ...): while one exists, every git command that needs
that file fails. A lock is stale when no process has it open: git holds a lock file open
from the moment it creates it until it renames or removes it (lockfile.c), so a lock
nobody holds open belongs to a process that is gone (issue #19); and git may also keep a lock
it has closed until it commits it (`git commit -a` with its editor open), so while any git
works in the repository, no lock is stale. Which processes hold what, and where gits work,
is psutil's to say, on every platform it covers (issue #40).
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


def held_paths() -> set[str]:
    """Every regular file some process on this host has open, through psutil (Linux, macOS,
    the BSDs: the hand-written /proc reader found nothing on macOS, so every lock looked
    stale, issue #40). A process whose files the OS does not let us read (another user's, a
    sandbox's init) is passed over: the engine's and its operator's gits run as its user."""
    import psutil  # where it is used: `status` must not pay for it (bench figure 8)

    found: set[str] = set()
    for proc in psutil.process_iter():
        try:
            found.update(f.path for f in proc.open_files())
        except (psutil.Error, OSError):
            continue  # gone meanwhile, or not ours to read
    return found


def working_gits(roots: Iterable[Path]) -> bool:
    """Whether a live git process works in one of `roots` (its directory is in one): such a
    git may hold a lock it has closed but not yet committed (lockfile.c's
    `close_lock_file_gently`: `git commit -a` keeps `index.lock` so, with no file open, while
    its editor runs)."""
    import psutil

    places = [r.resolve() for r in roots]
    for proc in psutil.process_iter(["name"]):
        name = proc.info.get("name") or ""
        if name != "git" and not name.startswith("git-"):
            continue
        try:
            cwd = Path(proc.cwd()).resolve()
        except (psutil.Error, OSError):
            continue
        if any(cwd == r or r in cwd.parents for r in places):
            return True
    return False


def _roots(git_dir: Path) -> set[Path]:
    """Where a git working on `git_dir` runs: the directory itself, its work tree, and each
    linked worktree's."""
    roots = {git_dir, git_dir.parent if git_dir.name == ".git" else git_dir}
    for link in git_dir.glob("worktrees/*/gitdir"):
        try:
            roots.add(Path(link.read_text(encoding="utf-8").strip()).parent)
        except OSError:
            continue
    return roots


def stale_locks(git_dirs: Iterable[Path]) -> list[Path]:
    """`*.lock` files under the git directories that no process holds open, where no git is
    at work."""
    candidates: list[Path] = []
    dirs = {Path(d) for d in git_dirs}
    if working_gits(set().union(*(_roots(d) for d in dirs))):
        return []  # one of them may hold a lock it has closed: nothing is stale now
    for git_dir in dirs:
        for dirpath, dirnames, filenames in os.walk(git_dir):
            if Path(dirpath) == git_dir:
                dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            candidates += [Path(dirpath) / f for f in filenames if f.endswith(".lock")]
    if not candidates:
        return []
    held = held_paths()
    return sorted(p for p in candidates if str(p) not in held and str(p.resolve()) not in held)


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
