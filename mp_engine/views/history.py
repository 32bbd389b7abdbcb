"""Past MPs from the run archive, newest first: what `mp-engine history` and the dashboard
list."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import TEMP_MARKER
from mp_engine.core.workspace import Workspace
from mp_engine.record.digest import read_result


def history(
    ws: Workspace, limit: int | None = None, read: Callable[[Path], dict[str, Any] | None] = read_result
) -> list[dict[str, Any]]:
    """One entry per run directory (newest first): id, title, status, why it did not complete,
    certificate, duration, time. `read`: how a run's result.json is read (the dashboard
    caches them)."""
    try:
        dirs = sorted((d for d in ws.runs_dir.iterdir() if d.is_dir() and TEMP_MARKER not in d.name), reverse=True)
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for d in dirs:
        if limit is not None and len(out) >= limit:
            break
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
