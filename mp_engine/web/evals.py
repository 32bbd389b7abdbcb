"""The dashboard's page of evals (issue #43): the reports `mp-engine eval` wrote in the
workspace's eval directory (`SYSTEM/.engine/eval/NAME/report.json`, docs/EVAL.md), read as
JSON (the eval package is above the dashboard's layer; its report is a file like any other),
and the rate bars of one report."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mp_engine.core.workspace import Workspace

SCHEMA = "mp-engine/eval-report/1"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
BAR_WIDTH = 360


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None


def reports(ws: Workspace) -> list[dict[str, Any]]:
    """Every eval with a report, newest first: its name, task set, size and each
    configuration's resolved / judged."""
    found = []
    root = ws.evals_dir
    for path in root.glob("*/report.json") if root.is_dir() else ():
        doc = _read(path)
        if doc is None:
            continue
        configs = [
            {k: c.get(k) for k in ("name", "resolved", "judged", "resolve_rate", "pending")} for c in doc["configs"]
        ]
        found.append(
            {
                "name": path.parent.name,
                "task_set": doc.get("task_set"),
                "tasks": doc.get("tasks"),
                "configs": configs,
                "generated_at": doc.get("generated_at") or "",
            }
        )
    return sorted(found, key=lambda e: e["generated_at"], reverse=True)


def report(ws: Workspace, name: str) -> dict[str, Any] | None:
    """One eval's report (None for a name that is not one), with its rate bars."""
    if not NAME_RE.match(name):
        return None
    doc = _read(ws.evals_dir / name / "report.json")
    if doc is None:
        return None
    return {**doc, "name": name, "bars": bars(doc["configs"])}


def bars(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each configuration's rate as a bar and its 95 % interval as a whisker, in pixels."""
    out = []
    for i, c in enumerate(configs):
        lo, hi = c.get("ci95") or (0.0, 1.0)
        out.append(
            {
                "name": c["name"],
                "y": i * 28,
                "w": round((c.get("resolve_rate") or 0.0) * BAR_WIDTH, 1),
                "lo": round(lo * BAR_WIDTH, 1),
                "hi": round(hi * BAR_WIDTH, 1),
                "label": "-"
                if c.get("resolve_rate") is None
                else f"{c['resolve_rate']:.0%} ({c['resolved']}/{c['judged']})",
            }
        )
    return out
