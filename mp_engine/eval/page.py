"""report.html: the report as one self-contained page with its plots drawn as inline SVG (no
script, no library, nothing fetched): the resolve rate of each configuration with its 95 %
interval, and each task's time and cost under each configuration. Every text from a task set
or a run is escaped."""

from __future__ import annotations

from html import escape
from typing import Any

from mp_engine.eval.markdown import render as render_md

COLOURS = ("#2f6fb0", "#d2691e", "#2e8b57", "#8b3a8b", "#b8860b", "#4682b4")
STYLE = (
    "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 7px;text-align:left}"
    "th{background:#f3f3f3}.resolved{color:#176e2c}.unresolved{color:#a11}.env_error,.error{color:#777}"
    "svg text{font:12px system-ui,sans-serif}"
)


def render(doc: dict[str, Any]) -> str:
    names = [c["name"] for c in doc["configs"]]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Eval: {escape(str(doc['task_set']))}</title><style>{STYLE}</style></head><body>",
        f"<h1>Eval: {escape(str(doc['task_set']))}</h1>",
        "<h2>Resolve rate (95 % interval)</h2>",
        rates(doc["configs"]),
        "<h2>Time and cost per task</h2>",
        scatter(doc["per_task"], names),
        "<h2>The report</h2>",
        "<pre>" + escape(render_md(doc)) + "</pre>",
        "</body></html>",
    ]
    return "\n".join(parts)


def rates(configs: list[dict[str, Any]]) -> str:
    """A bar per configuration: its resolve rate, with the 95 % interval as a whisker."""
    width, row = 640, 34
    height = row * len(configs) + 30
    left, span = 160, width - 200
    out = [f"<svg width='{width}' height='{height}' role='img' aria-label='resolve rates'>"]
    for i, c in enumerate(configs):
        y = 10 + i * row
        rate = c["resolve_rate"] or 0.0
        lo, hi = c["ci95"]
        colour = COLOURS[i % len(COLOURS)]
        out.append(f"<text x='0' y='{y + 17}'>{escape(str(c['name']))}</text>")
        out.append(f"<rect x='{left}' y='{y}' width='{rate * span:.1f}' height='22' fill='{colour}' opacity='0.8'/>")
        out.append(
            f"<line x1='{left + lo * span:.1f}' x2='{left + hi * span:.1f}' y1='{y + 11}' y2='{y + 11}' stroke='#000'/>"
        )
        label = "-" if c["resolve_rate"] is None else f"{rate:.0%} ({c['resolved']}/{c['judged']})"
        out.append(f"<text x='{left + span + 8}' y='{y + 17}'>{label}</text>")
    out.append(f"<line x1='{left}' x2='{left}' y1='0' y2='{height - 20}' stroke='#999'/>")
    out.append(
        f"<text x='{left}' y='{height - 4}'>0 %</text><text x='{left + span - 30}' y='{height - 4}'>100 %</text>"
    )
    return "".join(out) + "</svg>"


def scatter(per_task: list[dict[str, Any]], names: list[str]) -> str:
    """Each task's run time (x) and cost (y) per configuration; a filled dot is resolved."""
    points = [
        (
            i,
            float((r.get("time") or {}).get("run") or 0.0),
            float(r.get("cost_usd") or 0.0),
            r["verdict"],
            t["instance_id"],
        )
        for t in per_task
        for i, n in enumerate(names)
        if (r := t.get(n)) and r.get("certificate")
    ]
    if not points:
        return "<p>No task has run yet.</p>"
    width, height, pad = 640, 320, 40
    max_t = max(p[1] for p in points) or 1.0
    max_c = max(p[2] for p in points) or 1.0
    out = [f"<svg width='{width}' height='{height}' role='img' aria-label='time and cost per task'>"]
    out.append(f"<line x1='{pad}' y1='{height - pad}' x2='{width - 10}' y2='{height - pad}' stroke='#999'/>")
    out.append(f"<line x1='{pad}' y1='10' x2='{pad}' y2='{height - pad}' stroke='#999'/>")
    out.append(f"<text x='{width - 120}' y='{height - 10}'>time, max {max_t:.1f} s</text>")
    out.append(f"<text x='{pad + 4}' y='20'>cost, max ${max_c:.4f}</text>")
    for i, t, c, verdict, iid in points:
        x = pad + t / max_t * (width - pad - 20)
        y = height - pad - c / max_c * (height - pad - 20)
        colour = COLOURS[i % len(COLOURS)]
        fill = colour if verdict == "resolved" else "none"
        out.append(
            f"<circle cx='{x:.1f}' cy='{y:.1f}' r='5' stroke='{colour}' fill='{fill}'>"
            f"<title>{escape(iid)} ({escape(names[i])}): {escape(verdict)}, {t:.1f} s, ${c:.4f}</title></circle>"
        )
    legend = "".join(
        f"<span style='color:{COLOURS[i % len(COLOURS)]}'>&#9679; {escape(n)}</span> " for i, n in enumerate(names)
    )
    return "".join(out) + "</svg><p>" + legend + "(filled: resolved)</p>"
