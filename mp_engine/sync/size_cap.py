"""What a result commit may carry: no file above `[git] max_file_bytes` (issue #14).

A step that prints 66 MB, or an MP that builds a large artifact, must not make every
later push fail against a remote that refuses big files (GitHub at 100 MB, any pre-receive
hook). Such a file stays on the host, uncommitted; the run's result names it with the fix,
once, and later commits leave it alone (`too_large` in gitsync.json).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from mp_engine.record.archive import RunArchive
from mp_engine.record.result import add_note
from mp_engine.sync.context import SyncContext


def hold_back(
    sync: SyncContext, data: dict[str, Any], paths: list[str], run_id: str | None
) -> tuple[list[str], list[str]]:
    """(the paths to stage, files inside them to unstage again). Files newly found over the
    cap are remembered in `data` (saved by the caller's `remember`) and noted in the run's
    result."""
    cap = sync.cfg.max_file_bytes
    if not cap or not paths:
        return paths, []
    known: dict[str, int] = data.setdefault("too_large", {})
    big = oversized(sync.ws.root, paths, cap)
    new = {p: size for p, size in big.items() if p not in known}
    if new:
        known.update(new)
        sync.events.emit("sync_file_held_back", files=sorted(new), cap=cap, run=run_id)
        if run_id is not None:
            add_note(sync.ws, RunArchive(sync.ws.runs_dir / run_id), note(new, cap), sync.redact or (lambda s: s))
    for gone in [p for p in known if p not in big and not (sync.ws.root / p).exists()]:
        del known[gone]
    return [p for p in paths if p not in big], [p for p in big if p not in paths]


def note(files: dict[str, int], cap: int) -> str:
    listed = ", ".join(f"`{p}` ({size:,} bytes)" for p, size in sorted(files.items()))
    return (
        f"Not committed, over [git] max_file_bytes = {cap:,}: {listed}. They stay on the engine host. "
        "Fix: write large outputs outside the repository (or list them in .gitignore); raise "
        "[git] max_file_bytes only if the remote accepts files that big."
    )


def oversized(root: Path, paths: list[str], cap: int) -> dict[str, int]:
    """Regular files over `cap` bytes among `paths` and inside the directories among them."""
    found: dict[str, int] = {}
    for rel in paths:
        full = root / rel
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            if st.st_size > cap:
                found[rel] = st.st_size
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        for dirpath, dirnames, files in os.walk(full):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            for name in files:
                path = Path(dirpath) / name
                try:
                    fst = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISREG(fst.st_mode) and fst.st_size > cap:
                    found[path.relative_to(root).as_posix()] = fst.st_size
    return found
