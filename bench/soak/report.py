"""bench/SOAK.md: the soak's verdict and figures as tables, between markers; what is below
the markers is written by hand and kept."""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

START, END = "<!-- soak:start -->", "<!-- soak:end -->"
PATH = Path(__file__).resolve().parents[1] / "SOAK.md"
SHOWN = 12  # violations listed per family


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f} ms" if v < 10 else f"{v:.1f} s"


def triple(st: dict[str, float] | None) -> str:
    if not st:
        return "- | - | -"
    return f"{ms(st['median'])} | {ms(st['p95'])} | {ms(st['max'])}"


def markdown(outcome: Any) -> str:
    f, s = outcome.figures, outcome.settings
    out = [
        f"Soak of {time.strftime('%Y-%m-%d')}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}: {s.mps} MPs, {s.fault_count} faults scheduled, seed {s.seed}; "
        f"{f['elapsed_s'] / 60:.1f} min; load average at the end {f['load'][0]:.2f} "
        f"(the 2 CPUs are shared); {f['daemon_lives']} daemon starts.",
        "",
        "| invariant | violations |",
        "|---|---:|",
    ]
    out += [f"| {name} | {len(v)} |" for name, v in outcome.violations.items()]
    out += ["", "| MP kind | sent | latency p50 | p95 | max |", "|---|---:|---:|---:|---:|"]
    for kind, n in sorted(f["mps_sent"].items()):
        out.append(f"| {kind} | {n} | {triple(f['latency'].get(kind))} |")
    out.append(f"| duplicates re-sent (nothing ran again) | {f['duplicates']} | - | - | - |")
    out += [
        "",
        f"Results on the remote: {f['results']}; agent micro-tasks committed: {f['tasks_done']}; "
        f"alerts received: {f['alerts_received']}.",
        "",
        "| fault | scheduled | struck | recovery median | p95 | max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, n in sorted(f["faults_scheduled"].items()):
        out.append(f"| {kind} | {n} | {f['faults_struck'].get(kind, 0)} | {triple(f['recovery'].get(kind))} |")
    if f.get("disk_faults"):
        out += ["", f["disk_faults"] + "."]
    out += ["", *resources(f)]
    if outcome.explained:
        out += ["", f"Results a fault explains ({len(outcome.explained)}): " + "; ".join(outcome.explained[:SHOWN])]
    bad = {k: v for k, v in outcome.violations.items() if v}
    for name, items in bad.items():
        out += ["", f"**{name}** ({len(items)}):", *[f"- {i}" for i in items[:SHOWN]]]
    return "\n".join(out)


def resources(f: dict[str, Any]) -> list[str]:
    m = f["memory"] or {}
    growth = m.get("rss_growth_mb_per_1000")
    idle = [x for x in f["idle"] if x is not None]
    per = f["disk_per_1000"]
    rem = f["remote_per_1000"]
    return [
        "| resource | value |",
        "|---|---:|",
        f"| daemon RSS, longest life (start {m.get('life', '-')}, {m.get('mps_in_life', 0)} MPs): start / after "
        f"{100} MPs / end | {m.get('rss_start_mb', 0):.1f} / {m.get('rss_warm_mb') or 0:.1f} / {m.get('rss_end_mb', 0):.1f} MB |",
        f"| RSS growth per 1,000 MPs after warm-up (over {m.get('mps_after_warm_up', 0)} MPs) | "
        + ("-" if growth is None else f"{growth:.2f} MB")
        + " |",
        f"| open fds, longest life: after warm-up / max / end | {m.get('fds_warm', '-')} / {m.get('fds_max', '-')} / {m.get('fds_end', '-')} |",
        f"| idle CPU: fresh engine / at each checkpoint after it | {f['idle_baseline'] or 0:.2f} % / "
        + (", ".join(f"{x:.2f}" for x in idle) + " %" if idle else "-")
        + " |",
        "| engine disk per 1,000 MPs (workspace and its .git) | "
        + ("-" if per is None else f"{per / 2**20:.1f} MiB")
        + " |",
        "| remote per 1,000 MPs | " + ("-" if rem is None else f"{rem / 2**20:.1f} MiB") + " |",
    ]


def write(text: str) -> Path:
    old = PATH.read_text() if PATH.exists() else f"# Soak results\n\n{START}\n{END}\n"
    if START not in old or END not in old:
        old = f"{old.rstrip()}\n\n{START}\n{END}\n"
    head, rest = old.split(START, 1)
    _, tail = rest.split(END, 1)
    PATH.write_text(f"{head}{START}\n{text}\n{END}{tail}")
    return PATH
