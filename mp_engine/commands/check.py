"""`mp-engine check FILE`: parse an MP without running it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from mp_engine.agent.api import AgentExecutor, decompose
from mp_engine.core.errors import InvalidMPError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.terminal import escape_controls
from mp_engine.execute.shell import require_executable
from mp_engine.inbox.mpfile import MicroProject, parse


def check(
    file: Path, as_json: bool, max_bytes: int, echo: Callable[[str], None], err: Callable[[str], None]
) -> ExitCode:
    micro_tasks: list[dict] = []
    try:
        mp = parse(file.read_bytes(), max_bytes=max_bytes)
        if (mp.executor or "shell") == "shell":
            require_executable(mp)
        else:
            AgentExecutor().validate(mp)
            # A planned MP's tasks come from the planner at run time.
            if mp.headers.get("Plan") not in ("auto", "review"):
                micro_tasks = decompose(mp).summary(mp)
    except InvalidMPError as e:
        if as_json:  # a program asked for JSON: it gets JSON, valid or not
            echo(json.dumps({"valid": False, "file": str(file), "reason": e.reason, "fix": e.fix, "line": e.line}))
        else:
            err(f"{file}: invalid MP: {e.reason}" + (f" (line {e.line})" if e.line else ""))
            err(f"fix: {e.fix}")
        return ExitCode.MP_ERROR
    summary = {"valid": True, **mp.summary()}
    if mp.executor == "agent":
        summary["micro_tasks"] = micro_tasks
    if as_json:
        echo(json.dumps(summary, indent=2))
    else:
        for line in render(mp, summary, micro_tasks):
            echo(escape_controls(line))  # titles, notes and step lines come from the MP
    return ExitCode.OK


def render(mp: MicroProject, summary: dict, micro_tasks: list[dict]) -> list[str]:
    lines = [f"{mp.mp_id}: {mp.title or '(no title)'}"]
    lines += [f"  {key}: {value}" for key, value in mp.headers.items()]
    lines.append(f"  sha256: {mp.sha256}")
    lines.append(f"steps ({len(mp.steps)}):")
    lines += [f"  {s['id']}  line {s['line']:<4} {s['what']}" for s in summary["steps"]]
    lines.append(f"checks ({len(mp.checks)}):")
    lines += [f"  {c['id']}  line {c['line']:<4} {c['what']}" for c in summary["checks"]]
    if mp.executor == "agent" and mp.headers.get("Plan") in ("auto", "review"):
        lines.append("micro-tasks: planned at run time by `[agent.planner]` (docs/AGENT.md, Plans)")
    elif mp.executor == "agent":  # the decomposition rule: docs/AGENT.md
        lines.append(f"micro-tasks ({len(micro_tasks)}), each accepted by its checks:")
        for t in micro_tasks:
            route = f"  (route: {t['domain']})" if t.get("domain") else ""
            lines.append(
                f"  {t['id']}  line {t['line']:<4} {t['title']}  [{', '.join(t['checks']) or 'no checks'}]{route}"
            )
        if mp.steps:
            lines.append(
                "note: the agent executor does not run the fenced blocks above; they are part of the instructions"
            )
    lines += [f"note: {note}" for note in mp.notes]
    return lines
