"""History as plots (issue #32) and the month's spend against the daily budget (issue
#42): bar coordinates a template draws as SVG, so the page needs no charting script.
Pure: numbers in, rectangles, axes and labels out."""

from __future__ import annotations

import math
from typing import Any

# The durations plot's frame: room for the y axis's labels on the left and the x axis's
# below; a bar is never thinner than MIN_BAR, so a run of a few milliseconds beside one of
# minutes still shows (issue #44: they were 1 px, as good as none).
LEFT, BOTTOM, TOP, MIN_BAR, MAX_STEP = 64, 20, 8, 3.0, 24.0


def durations(runs: list[dict[str, Any]], *, width: int = 720, height: int = 160, most: int = 100) -> dict[str, Any]:
    """One bar per run (oldest left, the newest `most`), its height the run's duration on a
    scale from 0 to a round number above the longest, its class the outcome; the y axis
    with three labelled ticks, the x axis with the first and last run's day."""
    shown = [r for r in runs if r.get("duration") is not None][:most][::-1]
    top = max((float(r["duration"]) for r in shown), default=0.0)
    scale = round_up(top)
    plot_w, plot_h = width - LEFT, height - BOTTOM - TOP
    base = TOP + plot_h
    step = min(plot_w / max(len(shown), 1), MAX_STEP)
    bars = []
    for i, r in enumerate(shown):
        h = max(MIN_BAR, float(r["duration"]) / scale * plot_h)
        bars.append(
            {
                "x": round(LEFT + i * step + 0.5, 1),
                "y": round(base - h, 1),
                "w": round(max(step - 1, 1), 1),
                "h": round(h, 1),
                "status": r.get("status") or "?",
                "run_id": r.get("run_id"),
                "label": f"{r.get('mp_id')} {r.get('status')} {label(float(r['duration']))}",
            }
        )
    ticks = [{"y": round(base - f * plot_h, 1), "label": label(scale * f)} for f in (0.0, 0.5, 1.0)]
    days = [str(r.get("finished_at") or r.get("started_at") or "")[:10] for r in (shown[:1] + shown[-1:])]
    return {
        "bars": bars,
        "width": width,
        "height": height,
        "top": round(top, 3),
        "top_label": label(top),
        "axis": {"left": LEFT, "base": base, "top": TOP, "right": width},
        "ticks": ticks,
        "first": days[0] if days else "",
        "last": days[-1] if len(shown) > 1 else "",
        "last_x": round(min(width, max(LEFT + len(shown) * step, LEFT + 140)), 1),  # clear of the first's
    }


def round_up(value: float) -> float:
    """The smallest of 1, 2 or 5 times a power of ten at or above `value` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value * (1 - 1e-9))


def label(seconds: float) -> str:
    """A duration on an axis: "0", "250 ms", "2.5 s", "4 min"."""
    if seconds <= 0:
        return "0"
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


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


def spend(days: list[dict[str, Any]], daily: float | None, *, width: int = 420, height: int = 110) -> dict[str, Any]:
    """One bar per day of the month so far (`{"day": "2026-11-03", "usd": 1.2}`, a day of
    the month at its place), on a scale from $0 to a round number above the most spent in
    a day and the daily budget; the budget as a line across, bars over it marked."""
    top = max([float(d["usd"]) for d in days] + [float(daily or 0.0)], default=0.0)
    scale = round_up(top)
    plot_w, plot_h = width - LEFT, height - BOTTOM - TOP
    base, step = TOP + plot_h, plot_w / 31
    bars: list[dict[str, Any]] = []
    for d in days:
        usd, n = float(d["usd"]), int(str(d["day"])[8:10])
        h = max(MIN_BAR, usd / scale * plot_h) if usd > 0 else 0.0
        over = daily is not None and usd >= daily
        x = round(LEFT + (n - 1) * step + 0.5, 1)
        said = f"{d['day']}: ${usd:.4f}" + (" (the daily budget spent)" if over else "")
        bars.append({"x": x, "y": round(base - h, 1), "w": round(max(step - 1, 1), 1), "h": round(h, 1), "over": over})
        bars[-1]["label"] = said
    limit = None if daily is None else round(base - float(daily) / scale * plot_h, 1)
    ticks = [{"y": round(base - f * plot_h, 1), "label": f"${scale * f:g}"} for f in (0.0, 0.5, 1.0)]
    axis = {"left": LEFT, "base": base, "top": TOP, "right": width}
    return {"bars": bars, "width": width, "height": height, "limit_y": limit, "ticks": ticks, "axis": axis}
