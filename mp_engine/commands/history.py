"""`mp-engine history`: past MPs from the run archive, newest first."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.terminal import terminal_safe
from mp_engine.core.workspace import Workspace
from mp_engine.views.history import history


def render_history(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "no MPs in the run archive yet"
    rows = [("MP", "TITLE", "STATUS", "CERT", "DURATION", "FINISHED (UTC)", "RUN")]
    for e in entries:
        duration = "-" if e.get("duration") is None else f"{float(e['duration']):.1f}s"
        when = (e.get("finished_at") or e.get("started_at") or "-").replace("T", " ")[:19]
        title = e.get("title") or ""
        rows.append(
            (
                e.get("mp_id") or "?",
                title if len(title) <= 40 else title[:39] + "…",
                e.get("status") or "?",
                e.get("certificate") or "-",
                duration,
                when,
                e["run_id"],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows)


def history_command(root: Path, limit: int, as_json: bool, echo: Callable[[str], None]) -> ExitCode:
    ws = Workspace.at(root)
    ws.check()
    entries = history(ws, limit)
    echo(json.dumps(entries, indent=2) if as_json else render_history(terminal_safe(entries)))
    return ExitCode.OK
