"""report.md: the report as tables, in the layout of bench/RESULTS.md (a figure, its value,
what it is measured against), so a user's numbers can be put beside ours."""

from __future__ import annotations

from typing import Any


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f} s"


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:.4f}"


def cell(text: object) -> str:
    """A table cell: no pipe or newline from a task's text breaks the table."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(doc: dict[str, Any]) -> str:
    lines = [
        f"# Eval: {doc['task_set']}",
        "",
        f"{doc['tasks']} task(s); mp-engine {doc.get('engine')}; begun {doc.get('began_at')}, "
        f"reported {doc.get('generated_at')}.",
        "",
        "## Configurations",
        "",
        "| configuration | resolved | rate (95 % CI) | env_error | error | time p50 / p95 | cost p50 / p95 | $ per resolved "
        "| engine overhead p50 (share) | harness p50 | EXACT but unresolved |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in doc["configs"]:
        lines.append(
            f"| {cell(c['name'])} | {c['resolved']}/{c['judged']} | {_pct(c['resolve_rate'])} "
            f"({_pct(c['ci95'][0])}-{_pct(c['ci95'][1])}) | {c['env_error']} | {c['error']} | "
            f"{_s(c['time_p50'])} / {_s(c['time_p95'])} | {_usd(c['cost_p50'])} / {_usd(c['cost_p95'])} | "
            f"{_usd(c['cost_per_resolved'])} | {_s(c['engine_seconds_p50'])} ({_pct(c['engine_share'])}) | "
            f"{_s(c['harness_seconds_p50'])} | {c['exact_unresolved']} |"
        )
    lines += (
        comparisons(doc)
        + per_task(doc)
        + [
            "",
            "Resolved: every FAIL_TO_PASS test passes and every PASS_TO_PASS test still does, judged in a copy the "
            "agent never saw; its claims play no part. The rate counts only tasks an agent could be judged on: "
            "env_error (the environment) and error (the harness) are apart. Time: `mp-engine once` on the task; "
            "engine overhead: that time outside agent calls and checks; harness: the eval's probe, workspace and "
            "judging. Cost: what the agent CLIs reported (`-` when none did).",
            "",
        ]
    )
    return "\n".join(lines)


def comparisons(doc: dict[str, Any]) -> list[str]:
    if not doc["comparisons"]:
        return []
    lines = [
        "",
        "## Paired comparisons",
        "",
        "| b vs a | paired | both | only a | only b | neither | rate a | rate b | difference | p (McNemar, exact) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in doc["comparisons"]:
        diff = "-" if k["difference"] is None else f"{k['difference']:+.0%}"
        mark = " (more than chance)" if k["significant"] else ""
        lines.append(
            f"| {cell(k['b'])} vs {cell(k['a'])} | {k['paired']} | {k['both']} | {k['only_a']} | {k['only_b']} | "
            f"{k['neither']} | {_pct(k['rate_a'])} | {_pct(k['rate_b'])} | {diff} | {k['p_value']:.3g}{mark} |"
        )
    return lines


def per_task(doc: dict[str, Any]) -> list[str]:
    names = [c["name"] for c in doc["configs"]]
    lines = [
        "",
        "## Tasks",
        "",
        "| task | " + " | ".join(cell(n) for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for row in doc["per_task"]:
        cells = [task_cell(row.get(n)) for n in names]
        lines.append(f"| {cell(row['instance_id'])} | " + " | ".join(cells) + " |")
    return lines


def task_cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "not judged yet"
    if not r.get("certificate"):
        return cell(f"{r['verdict']}: {r.get('why', '')[:80]}")
    tokens = sum((r.get("tokens") or {}).values())
    levels = ",".join(r.get("levels") or [])
    return cell(
        f"{r['verdict']} ({r['certificate']}, {r.get('iterations')} it., {levels}, {tokens} tok, "
        f"{_usd(r.get('cost_usd'))}, {_s((r.get('time') or {}).get('run'))})"
    )
