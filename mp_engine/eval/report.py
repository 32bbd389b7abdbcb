"""The report (issue #43): from results.jsonl, per configuration the resolve rate with its 95 %
interval, p50 / p95 time and cost, dollars per resolved task, the engine's own overhead and
the harness's; per task what each configuration did; and every configuration against the
first, paired per task, with McNemar's exact test. Written as report.json (the data),
report.md and report.html (markdown.py, page.py).

The rate counts only the tasks an agent could be judged on: `env_error` (the environment)
and `error` (the harness) are counted apart, never as the agent's failures.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import atomic_write, atomic_write_json
from mp_engine.core.clock import now_iso
from mp_engine.eval.layout import EvalDir
from mp_engine.eval.results import AGENT_VERDICTS, Results, Verdict
from mp_engine.eval.stats import mcnemar_exact, percentile, wilson
from mp_engine.eval.tasks import TaskSet

SCHEMA = "mp-engine/eval-report/1"
ALPHA = 0.05


def build(manifest: dict[str, Any], tasks: Sequence[str], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The report's data from the eval's manifest, its task ids (in order) and its results."""
    configs = list(manifest.get("order") or manifest.get("configs") or {})
    by = {(r["config"], r["instance_id"]): r for r in rows}
    return {
        "schema": SCHEMA,
        "task_set": manifest.get("task_set"),
        "tasks": len(tasks),
        "engine": manifest.get("engine"),
        "began_at": manifest.get("began_at"),
        "generated_at": now_iso(),
        "configs": [summarise(c, [by[(c, t)] for t in tasks if (c, t) in by], len(tasks)) for c in configs],
        "comparisons": [compare(configs[0], b, tasks, by) for b in configs[1:]],
        "per_task": [{"instance_id": t, **{c: brief(by.get((c, t))) for c in configs}} for t in tasks],
    }


def summarise(config: str, rows: Sequence[dict[str, Any]], total: int) -> dict[str, Any]:
    counts = Counter(r["verdict"] for r in rows)
    judged = sum(counts[v] for v in AGENT_VERDICTS)
    resolved = counts[Verdict.RESOLVED]
    ran = [r for r in rows if r.get("run_id")]
    run_time = [r["time"]["run"] for r in ran]
    costs = [r["cost_usd"] for r in ran if r.get("cost_usd") is not None]
    spent = round(sum(costs), 6) if costs else None
    inside = sum(r["time"]["run"] for r in ran)
    engine = sum(r["time"].get("engine", 0.0) for r in ran)
    harness = [r["time"].get("prepare", 0.0) + r["time"].get("judge", 0.0) + r["time"].get("probe", 0.0) for r in ran]
    lo, hi = wilson(resolved, judged)
    return {
        "name": config,
        "judged": judged,
        "resolved": resolved,
        "unresolved": counts[Verdict.UNRESOLVED],
        "env_error": counts[Verdict.ENV_ERROR],
        "error": counts[Verdict.ERROR],
        "pending": total - len(rows),
        "resolve_rate": round(resolved / judged, 4) if judged else None,
        "ci95": [round(lo, 4), round(hi, 4)],
        "time_p50": _r(percentile(run_time, 50)),
        "time_p95": _r(percentile(run_time, 95)),
        "cost_usd": spent,
        "cost_p50": _r(percentile(costs, 50), 6),
        "cost_p95": _r(percentile(costs, 95), 6),
        "cost_per_resolved": round(spent / resolved, 6) if spent is not None and resolved else None,
        "tokens": {k: sum(r["tokens"][k] for r in ran) for k in ("input", "output", "cache_read", "cache_write")},
        "iterations_p50": _r(percentile([r["iterations"] for r in ran], 50)),
        "engine_seconds_p50": _r(percentile([r["time"].get("engine", 0.0) for r in ran], 50)),
        "engine_share": round(engine / inside, 4) if inside else None,
        "harness_seconds_p50": _r(percentile(harness, 50)),
        "certificates": dict(Counter(str(r.get("certificate")) for r in ran)),
        # The engine's checks accepted the work (EXACT) but the hidden tests did not.
        "exact_unresolved": sum(1 for r in ran if r.get("certificate") == "EXACT" and r["verdict"] != Verdict.RESOLVED),
    }


def compare(a: str, b: str, tasks: Sequence[str], by: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """`b` against `a` on the tasks both could be judged on: the paired counts, the rates'
    difference, and whether it is more than chance (McNemar's exact test, p < 0.05)."""
    cells: Counter[tuple[bool, bool]] = Counter()
    for t in tasks:
        ra, rb = by.get((a, t)), by.get((b, t))
        if ra and rb and ra["verdict"] in AGENT_VERDICTS and rb["verdict"] in AGENT_VERDICTS:
            cells[(ra["verdict"] == Verdict.RESOLVED, rb["verdict"] == Verdict.RESOLVED)] += 1
    both, only_a, only_b, neither = (
        cells[(True, True)],
        cells[(True, False)],
        cells[(False, True)],
        cells[(False, False)],
    )
    n = sum(cells.values())
    p = mcnemar_exact(only_a, only_b)
    return {
        "a": a,
        "b": b,
        "paired": n,
        "both": both,
        "only_a": only_a,
        "only_b": only_b,
        "neither": neither,
        "rate_a": round((both + only_a) / n, 4) if n else None,
        "rate_b": round((both + only_b) / n, 4) if n else None,
        "difference": round((only_b - only_a) / n, 4) if n else None,
        "p_value": round(p, 6),
        "significant": p < ALPHA,
    }


def brief(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """One task under one configuration, as the report's table shows it."""
    if row is None:
        return None
    keys = ("verdict", "why", "certificate", "iterations", "levels", "tokens", "cost_usd", "time", "resumed", "archive")
    return {k: row.get(k) for k in keys if k in row}


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def write(out: EvalDir) -> dict[str, Any]:
    """Build the report from what the eval directory holds and write its three forms."""
    from mp_engine.eval import markdown, page

    manifest = json.loads(out.manifest.read_text(encoding="utf-8"))
    tasks = [t.instance_id for t in TaskSet.read(out.tasks, str(manifest.get("task_set"))).tasks]
    doc = build(manifest, tasks, Results(out.results).all())
    atomic_write_json(out.report("json"), doc)
    atomic_write(out.report("md"), markdown.render(doc))
    atomic_write(out.report("html"), page.render(doc))
    return doc


def read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """What the command prints at the end: one line per configuration, one per comparison."""
    lines = []
    for c in doc["configs"]:
        rate = "-" if c["resolve_rate"] is None else f"{c['resolve_rate']:.0%}"
        cost = "" if c["cost_per_resolved"] is None else f", ${c['cost_per_resolved']:.4f} per resolved"
        apart = f", {c['env_error']} env_error" if c["env_error"] else ""
        apart += f", {c['error']} error" if c["error"] else ""
        apart += f", {c['pending']} not judged yet" if c["pending"] else ""
        lines.append(
            f"{c['name']}: resolved {c['resolved']}/{c['judged']} ({rate}, 95% CI {c['ci95'][0]:.0%}-{c['ci95'][1]:.0%})"
            f"{apart}; time p50 {c['time_p50'] or 0:.1f} s{cost}"
        )
    for k in doc["comparisons"]:
        verdict = "more than chance" if k["significant"] else "within chance"
        lines.append(
            f"{k['b']} vs {k['a']}: {k['only_b']} resolved only by {k['b']}, {k['only_a']} only by {k['a']} "
            f"of {k['paired']} paired (p = {k['p_value']:.3g}, {verdict})"
        )
    return lines
