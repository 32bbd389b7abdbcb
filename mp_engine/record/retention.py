"""Retention of run archives (`[archive] keep_runs`, `[archive] max_bytes`, issue #14).

Every MP leaves a run archive in SYSTEM/runs/ (tens of KB for a trivial MP, much more
when steps print a lot). Without a bound the host's disk and the channel's history grow
forever. `prune()` removes the oldest runs beyond `keep_runs`, then the oldest while all
runs together exceed `max_bytes`; never a run that is still open (a crash or a limit wait
resumes it) and never one named in `protect` (the run of the current halt: its result
is what the orchestrator must answer). Runs are ordered by name, which starts with the
UTC time of the claim. Pruning works in batches (10% past `keep_runs`), so the commit
that carries the deletions is one per many MPs, not one per MP.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

from mp_engine.core.workspace import Workspace
from mp_engine.record.archive import LEDGER


def _size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def _closed(run: Path) -> bool:
    try:
        return json.loads((run / LEDGER).read_text(encoding="utf-8")).get("status") == "closed"
    except (OSError, ValueError):
        return False  # unreadable or missing: not ours to judge, keep it


def _created(run: Path) -> str:
    try:
        return str(json.loads((run / LEDGER).read_text(encoding="utf-8")).get("created_at", ""))
    except (OSError, ValueError):
        return ""


def runs(ws: Workspace) -> list[Path]:
    """Run directories, oldest first: by the claim time in the name (to the second), and
    within one second by the ledger's creation time (read only for such ties)."""
    try:
        names = sorted(n for n in os.listdir(ws.runs_dir) if not n.startswith("."))
    except FileNotFoundError:
        return []
    dirs = [ws.runs_dir / n for n in names if (ws.runs_dir / n).is_dir()]
    counts = Counter(d.name.split("-", 1)[0] for d in dirs)

    def key(d: Path) -> tuple[str, str]:
        stamp = d.name.split("-", 1)[0]
        return stamp, _created(d) if counts[stamp] > 1 else ""

    return sorted(dirs, key=key)


def prune(ws: Workspace, keep_runs: int, max_bytes: int, protect: set[str], *, check_bytes: bool = True) -> list[str]:
    """Remove old runs per the policy in the module docstring; the names removed."""
    if not (check_bytes and max_bytes):  # the common case: one directory listing, nothing read
        try:
            count = sum(1 for n in os.listdir(ws.runs_dir) if not n.startswith("."))
        except FileNotFoundError:
            return []
        if not keep_runs or count <= keep_runs + max(1, keep_runs // 10):
            return []
    all_runs = runs(ws)
    doomed: list[Path] = []
    if keep_runs and len(all_runs) > keep_runs + max(1, keep_runs // 10):
        doomed = all_runs[: len(all_runs) - keep_runs]
    if max_bytes and check_bytes:
        rest = all_runs[len(doomed) :]
        sizes = [_size(r) for r in rest]
        total = sum(sizes)
        for run, size in zip(rest[:-1], sizes[:-1], strict=True):  # the newest run always stays
            if total <= max_bytes:
                break
            doomed.append(run)
            total -= size
    removed = []
    for run in doomed:
        if run.name in protect or not _closed(run):
            continue
        shutil.rmtree(run, ignore_errors=True)
        removed.append(run.name)
    return removed
