"""What an agent run taught, for the repository's memory (record/memory.py, issue #34), and
the memory its prompts carry.

Lessons come from verified outcomes only, each one line:
  - a check that failed and then passed within a task the engine accepted: the check, the
    decisive line of its first failure (execute/decisive.py: what the check printed, not
    what the agent said), and how many iterations and which level it took;
  - a question a task asked that a person answered, and the task then passed.
An agent's summary, claims or status block never become a lesson.

The memory a run's prompts carry is snapshotted once, into the run's `agent/memory.md`:
every prompt of the run (and of a resumed run) starts with the same bytes, and the
evidence shows exactly which memory the prompts carried.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from mp_engine.agent.state.model import TaskState
from mp_engine.core.atomic import atomic_write, read_tail
from mp_engine.core.workspace import Workspace
from mp_engine.execute.decisive import decisive
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.record import memory

SNAPSHOT = "agent/memory.md"
QUOTE = 200  # characters of a decisive line or an answer kept in a lesson


def _short(text: str, limit: int = QUOTE) -> str:
    """`text` on one line, cut at a space (never inside a word: a token cut in half would
    no longer be recognised, and masked, by the redaction that runs before writing)."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3].rsplit(" ", 1)[0] + " ..."


def _command(body: str, default: str) -> str:
    """A check's first command line (its `# MT-...` comment lines skipped), shortened."""
    lines = (ln for ln in body.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
    return _short(next(lines, default), 80)


def of_run(tasks: list[TaskState], mp: MicroProject, steps_dir: Path) -> list[str]:
    """The run's lessons, in task order."""
    bodies = {b.step_id: b.body for b in mp.checks}
    out: list[str] = []
    for task in tasks:
        if task.status != "completed" or not task.records or not task.records[-1].get("gate"):
            continue
        final = task.records[-1]
        first_failure: dict[str, dict[str, Any]] = {}
        for rec in task.records[:-1]:
            measured = {m["id"]: m for m in rec.get("metrics", [])}
            for c in rec.get("checks", []):
                if not c["ok"] and c["id"] not in first_failure:
                    first_failure[c["id"]] = {**c, "metric": measured.get(c["id"])}
        passed = set(final.get("passed", []))
        for check_id, c in first_failure.items():
            if check_id not in passed:
                continue
            said = "\n".join(read_tail(steps_dir / f"{c['step']}.{s}", 8192) for s in ("stderr", "stdout"))
            line = next(iter(decisive(said, limit=1).lines), "")
            command = _command(bodies.get(check_id, ""), check_id)
            m = c["metric"]
            if m is not None and m["value"] is not None:  # a metric goal: where it started
                how = f" at {m['name']} {m['value']:g} (target {m['op']} {m['target']:g})"
            else:
                how = f" with `{_short(line)}`" if line else f" (exit {c.get('exit_code')})"
            out.append(
                f"`{command}` ({check_id}, {task.title}): failed first"
                + how
                + f"; passed after {task.iterations} iteration(s), at level {final.get('level_name') or final['level']}."
            )
        out += [f'Asked "{_short(qa["question"])}"; a person answered: {_short(qa["answer"])}' for qa in task.answers]
    return out


def snapshot(ws: Workspace, run_dir: Path, enabled: bool) -> str:
    """The memory every prompt of this run carries: `SYSTEM/memory.md` as the run first
    saw it, kept in the run's archive (empty when `[agent] memory` is off)."""
    if not enabled:
        return ""
    kept = run_dir / SNAPSHOT
    try:
        return kept.read_text(encoding="utf-8")
    except FileNotFoundError:
        pass
    text = memory.read(ws)
    if text.strip():
        atomic_write(kept, text, durable=False)
    return text


def prompt_section(memory: str) -> list[str]:
    """The memory as a section of a prompt (a worker's and the planner's); none when empty."""
    if not memory.strip():
        return []
    return ["## Memory of this repository (lessons of earlier MPs, verified by their checks)", "", memory.strip(), ""]


def carried(run_dir: Path, run_rel: str) -> dict[str, Any] | None:
    """Which memory the run's prompts carried, for the result: its snapshot and digest."""
    try:
        data = (run_dir / SNAPSHOT).read_bytes()
    except FileNotFoundError:
        return None
    return {"path": f"{run_rel}/{SNAPSHOT}", "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
