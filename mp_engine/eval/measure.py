"""What a task's run cost, read from its archive as the engine recorded it (never estimated):
the certificate, iterations and levels, tokens and dollars as the CLIs reported them, the time
in agent calls (each call's `call.json`) and in checks (the ledger's check steps, overlapping
ones counted once). The engine's own time is the rest of `once`'s wall time.

With parallel tasks in one MP, calls overlap and their sum can pass the wall time: the
engine's time is then a lower bound (docs/EVAL.md).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


def measure(run: Path, result: dict[str, Any]) -> dict[str, Any]:
    """The run's figures for one result row (see `results.py`)."""
    usage = result.get("usage") or {}
    tasks = [t for t in result.get("micro_tasks") or [] if isinstance(t, dict)]
    certificate = result.get("certificate") or {}
    names: list[str] = []
    for t in tasks:
        names += [n for n in t.get("level_names") or [] if n not in names]
    priced = int(usage.get("priced") or 0)
    return {
        "run_id": result.get("run_id"),
        "status": result.get("status"),
        "certificate": certificate.get("type"),
        "certificate_reason": certificate.get("reason"),
        "iterations": sum(int(t.get("iterations") or 0) for t in tasks),
        "micro_tasks": len(tasks),
        "levels": names,
        "tokens": {k: int(usage.get(k) or 0) for k in TOKEN_KINDS},
        "calls": int(usage.get("calls") or 0),
        "cost_usd": round(float(usage.get("cost_usd") or 0.0), 6) if priced else None,
        "agent_seconds": round(call_seconds(run), 3),
        "check_seconds": round(check_seconds(run), 3),
        "mp_seconds": float(result.get("duration") or 0.0),
        "work_commit": (result.get("work") or {}).get("commit"),
    }


def call_seconds(run: Path) -> float:
    """Every agent call of the run (iterations, planning rounds, drift checks, diagnoses)."""
    total = 0.0
    for path in (run / "agent").rglob("call.json") if (run / "agent").is_dir() else ():
        try:
            total += float(json.loads(path.read_text(encoding="utf-8"))["call"].get("duration") or 0.0)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return total


def check_seconds(run: Path) -> float:
    """The time some check ran: the union of the ledger's check steps' intervals."""
    try:
        steps = json.loads((run / "ledger.json").read_text(encoding="utf-8")).get("steps") or []
    except (OSError, ValueError):
        return 0.0
    spans = sorted(
        (start, end)
        for s in steps
        if isinstance(s, dict) and s.get("kind") == "check"
        for start, end in [(_ts(s.get("started_at")), _ts(s.get("completed_at")))]
        if start is not None and end is not None and end >= start
    )
    total, reach = 0.0, float("-inf")
    for start, end in spans:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _ts(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
