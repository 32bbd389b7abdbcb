"""History as plots (issue #32): bar coordinates a template draws as SVG, so the page
needs no charting script. Pure: numbers in, rectangles out."""

from __future__ import annotations

from typing import Any


def durations(runs: list[dict[str, Any]], *, width: int = 720, height: int = 120, most: int = 100) -> dict[str, Any]:
    """One bar per run (oldest left, the newest `most`), its height the run's duration,
    its class the outcome."""
    shown = [r for r in runs if r.get("duration") is not None][:most][::-1]
    top = max((float(r["duration"]) for r in shown), default=0.0) or 1.0
    step = width / max(len(shown), 1)
    bars = []
    for i, r in enumerate(shown):
        h = max(1.0, float(r["duration"]) / top * (height - 14))
        bars.append(
            {
                "x": round(i * step, 1),
                "y": round(height - h, 1),
                "w": round(max(step - 1, 1), 1),
                "h": round(h, 1),
                "status": r.get("status") or "?",
                "label": f"{r.get('mp_id')} {r.get('status')} {float(r['duration']):.1f} s",
            }
        )
    return {"bars": bars, "width": width, "height": height, "top": round(top, 1)}


def rates(levels: dict[str, dict[str, Any]], *, width: int = 360, row: int = 22) -> dict[str, Any]:
    """One horizontal bar per agent level: the share of the tasks reaching it that it finished."""
    bars = []
    for i, (name, v) in enumerate(sorted(levels.items())):
        bars.append(
            {
                "name": name,
                "y": i * row,
                "w": round(v["rate"] * width, 1),
                "rate": v["rate"],
                "finished": v["finished"],
                "reached": v["reached"],
            }
        )
    return {"bars": bars, "width": width, "height": max(len(bars), 1) * row, "row": row}
