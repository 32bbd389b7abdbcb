"""Past MPs from the run archive, newest first: what `mp-engine history` and the dashboard
list."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import TEMP_MARKER
from mp_engine.core.workspace import Workspace
from mp_engine.record.digest import read_result


def run_names(ws: Workspace) -> list[str]:
    """The run directories' names, newest first: one read of the archive's directory, no
    stat per run (10,000 runs, bench figure 25)."""
    try:
        with os.scandir(ws.runs_dir) as entries:
            return sorted((e.name for e in entries if TEMP_MARKER not in e.name and e.is_dir()), reverse=True)
    except FileNotFoundError:
        return []


def history(
    ws: Workspace,
    limit: int | None = None,
    read: Callable[[Path], dict[str, Any] | None] = read_result,
    names: list[str] | None = None,
) -> list[dict[str, Any]]:
    """One entry per run directory (newest first), the newest `limit`: id, title, status,
    why it did not complete, certificate, duration, time. `read`: how a run's result.json is
    read (the dashboard caches them); `names`: run_names(ws), when the caller has it."""
    out: list[dict[str, Any]] = []
    for name in (run_names(ws) if names is None else names)[:limit]:
        d = ws.runs_dir / name
        entry: dict[str, Any] = {"run_id": d.name}
        res = read(d)
        if res is not None:
            cert = res.get("certificate")
            diag = res.get("diagnosis") or {}
            entry.update(
                mp_id=res.get("mp_id"),
                title=res.get("title") or "",
                # Why it did not complete: a refused MP has often no title, and "invalid MP"
                # as its summary; its diagnosis says what was wrong (issue #44).
                why=(diag.get("text") if res.get("status") == "REFUSED" else diag.get("summary")) or None,
                status=res.get("status"),
                certificate=cert.get("type") if isinstance(cert, dict) else None,
                duration=res.get("duration"),
                finished_at=res.get("finished_at"),
                started_at=res.get("started_at"),
            )
        else:  # no result yet: an open run (running, checkpointed or waiting)
            try:
                ledger = json.loads((d / "ledger.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                ledger = {}
            entry.update(
                mp_id=ledger.get("mp_id"),
                title="",
                why=None,
                status="OPEN" if ledger.get("status") != "closed" else "CLOSED",
                certificate=None,
                duration=None,
                finished_at=None,
                started_at=ledger.get("created_at"),
            )
        out.append(entry)
    return out
