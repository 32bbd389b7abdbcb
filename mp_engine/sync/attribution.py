"""What a run changed: the paths its result commit carries, and what stays local.

One `git status` lists every change in the tree. The protocol files and the run archive
always travel; the inbox file only as the engine's own removal; any other path travels
when the run changed it (its ctime is after the run started and, if it was already dirty
then, its content differs from what it was). Everything else is the operator's and stays.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mp_engine.core.clock import parse_iso
from mp_engine.core.workspace import (
    CONFIG_FILE,
    EVENTS_FILE,
    LOCAL_DIR,
    RESULT_FILE,
    RUNS_DIR,
    STATE_FILE,
    SYSTEM_DIR,
    Workspace,
)
from mp_engine.inbox.cancel_request import CANCEL_PATH
from mp_engine.record.archive import RunArchive
from mp_engine.sync.session import GitSession
from mp_engine.sync.signatures import INBOX_PATH

RUNS_PREFIX = f"{SYSTEM_DIR}/{RUNS_DIR}/"
# The files the protocol owns; staged whenever they changed.
PROTOCOL_FILES = (
    STATE_FILE,
    f"{SYSTEM_DIR}/{RESULT_FILE}",
    f"{SYSTEM_DIR}/RESULT_last.json",
    f"{SYSTEM_DIR}/results.jsonl",
    f"{SYSTEM_DIR}/results.1.jsonl",
)
# The host's event log stays local: committed, it made every commit and push grow with it
# (to its 10 MiB rotation bound). Each run's events travel in `SYSTEM/runs/<run>/`.
EVENT_LOG = f"{SYSTEM_DIR}/{EVENTS_FILE}"
NEVER_STAGE = (".git/", f"{SYSTEM_DIR}/{LOCAL_DIR}/", CONFIG_FILE, EVENT_LOG)
STATUS_ARGS = (
    "-c",
    "core.untrackedCache=true",
    "status",
    "--porcelain=v1",
    "-z",
    "--untracked-files=normal",
    "--no-renames",
)


@dataclass
class Change:
    path: str
    code: str  # porcelain XY
    fingerprint: str


def changes(s: GitSession, root: Path) -> dict[str, Change]:
    """Every change in the tree, from one `git status`.

    `--untracked-files=normal` with the untracked cache (kept in the index) rescans only
    directories whose mtime moved; `=all` would list every file of every untracked
    directory on each call, which grows with the tree. A new directory is one entry
    (`dir/`); staging it stages what it holds."""
    found: dict[str, Change] = {}
    for entry in s.run(*STATUS_ARGS).split("\0"):
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        # Protocol files and run archives are staged whatever their content: no need to
        # hash them (the event log and step outputs can be large).
        owned = path in PROTOCOL_FILES or path.startswith((RUNS_PREFIX, *NEVER_STAGE))
        found[path] = Change(path, code, "" if owned else fingerprint(root / path))
    return found


def select(root: Path, found: dict[str, Change], baseline: dict[str, Any] | None) -> tuple[list[str], dict[str, str]]:
    """The paths to commit for a run with this baseline, and what stays local (path ->
    fingerprint, the next run's dirty set)."""
    paths, left = [], {}
    for path, ch in found.items():
        if path.startswith(NEVER_STAGE) or path == CONFIG_FILE:
            continue
        if path in PROTOCOL_FILES or path.startswith(RUNS_PREFIX):
            paths.append(path)
        elif path in (INBOX_PATH, CANCEL_PATH):
            if ch.fingerprint == "deleted":  # only the engine's own removal travels
                paths.append(path)
        elif baseline is not None and changed_by_run(root, path, ch, baseline):
            paths.append(path)
        else:
            left[path] = ch.fingerprint
    return paths, left


def changed_by_run(root: Path, path: str, ch: Change, baseline: dict[str, Any]) -> bool:
    """Did the run whose baseline this is change `path`?

    A path changed during the run has a ctime after the run started (the kernel sets
    ctime on every write, rename, chmod or deletion of an entry, and no program can set
    it back). A path that was already dirty when the run started must also differ from
    its fingerprint then, so a file the MP only touched keeps the operator's edit local.
    An old-style baseline (fingerprints of every change) compares fingerprints only."""
    if "since_ns" not in baseline:
        return baseline.get(path) != ch.fingerprint
    before = baseline["dirty"].get(path)
    if before is not None and before == ch.fingerprint:
        return False
    return ctime_ns(root / path) >= baseline["since_ns"]


def new_baseline(local_dir: Path, dirty: dict[str, str]) -> dict[str, Any]:
    """The baseline of a run starting now: the kernel's file clock, and the dirty set."""
    return {"since_ns": file_clock_ns(local_dir), "dirty": dirty}


def derived_baseline(ws: Workspace, run_id: str, dirty: dict[str, str]) -> dict[str, Any] | None:
    """The baseline of a run whose own was never recorded (the engine died between RUNNING
    and `running()`): its claim time from the ledger, less a second for the coarse file
    clock, so nothing the MP wrote is missed; a file the operator wrote in that second is
    attributed to the run. None when the run has no readable ledger, or ran nothing (an MP
    refused before it started: executor "none")."""
    try:
        ledger = RunArchive(ws.runs_dir / run_id).ledger().model
    except (OSError, ValueError):  # no ledger, or one pydantic cannot read
        return None
    if ledger.executor == "none":
        return None
    claimed = parse_iso(ledger.created_at).timestamp()
    return {"since_ns": int((claimed - 1.0) * 1e9), "dirty": dirty}


def file_clock_ns(local_dir: Path) -> int:
    """The kernel's file clock now: the ctime of a marker file written this instant.
    File times come from a coarse clock a tick behind `time.time()`; comparing like
    with like needs no margin."""
    marker = local_dir / "gitsync.since"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(os.getpid()))
    return marker.stat().st_ctime_ns


def fingerprint(path: Path) -> str:
    """Content hash of a changed path; for an untracked directory (one status entry),
    the newest ctime inside: it moves whenever anything in it is written."""
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        if path.is_dir():
            return f"dir:{ctime_ns(path)}"
        h = hashlib.sha1()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except FileNotFoundError:
        return "deleted"
    except OSError as e:
        return f"unreadable:{e.errno}"


def ctime_ns(path: Path) -> int:
    """ctime of `path` (the newest inside, for a directory); for a deleted path, of the
    nearest directory that still exists (a deletion sets its parent's ctime)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        parent = path.parent
        while not parent.exists():
            parent = parent.parent
        return parent.stat().st_ctime_ns
    newest = st.st_ctime_ns
    if stat.S_ISDIR(st.st_mode):
        for dirpath, _dirs, files in os.walk(path):
            for name in [*files, "."]:
                try:
                    newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_ctime_ns)
                except FileNotFoundError:
                    continue
    return newest
