"""Plans from a planner level (issue #17): the answer block it must print (its prompt is
prompt/planner.py), and the validation that turns that answer into micro-tasks.

The planner answers with one block, under the run's nonce like every claim:

    <plan nonce="N">
    {"tasks": [{"id": "model", "title": "...", "description": "...", "depends_on": [],
                "files": ["app/model.py"], "domain": "api", "checks": ["check-001"]}]}
    </plan>

The engine validates it (the schema below, unique ids, known dependencies, no cycle,
every check exists, every task accepted by at least one check) and orders it: the tasks
run in dependency order (the planner's order where it does not matter) as MT-001, MT-002,
... (numbering goes on after a re-plan). An invalid answer goes back to the planner once,
with what was wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mp_engine.agent.judge.claims import last_block
from mp_engine.agent.plan.decompose import MicroTask
from mp_engine.inbox.mpfile import MicroProject

PLAN_RE = re.compile(r"<plan\b([^>]*)>(.*?)</plan\s*>", re.S | re.I)
FENCE_RE = re.compile(r"^\s*```[\w-]*\s*\n(.*?)\n\s*```\s*$", re.S)
CHECK_RE = re.compile(r"^(?:check[-_ ]?)?0*(\d+)$", re.I)
MAX_TASKS = 50


class PlannedTask(BaseModel):
    # A model's extra commentary is not an error, and ids may come as numbers (`"id": 1`).
    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][\w.-]{0,39}$")
    title: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=8000)
    depends_on: list[str] = []
    files: list[str] = Field([], max_length=50)
    domain: str | None = Field(None, pattern=r"^[A-Za-z][\w-]*$")
    checks: list[str] = []
    pause: bool = False  # stop before this task for a person to look (a pause point)


class PlanAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tasks: list[PlannedTask] = Field(min_length=1, max_length=MAX_TASKS)


class PlanInvalid(ValueError):
    """The planner's answer is not a usable plan; the message says what to correct."""


def extract(output: str, nonce: str) -> str:
    """The JSON inside the last `<plan>` block carrying the run's nonce."""
    block = last_block(output, PLAN_RE, nonce)
    if block is None:
        raise PlanInvalid(f'no <plan nonce="{nonce}"> ... </plan> block in the answer')
    found = block.strip()
    fence = FENCE_RE.match(found)
    if fence:
        return fence.group(1)
    if not found.startswith("{") and "{" in found:  # "Here it is: {...}": the object in the prose
        return found[found.index("{") : found.rindex("}") + 1]
    return found


def _error_list(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'plan'}: {err['msg']}" for err in e.errors()[:10])


def validate(raw: str, mp: MicroProject, done: dict[str, int], first_number: int) -> list[dict[str, Any]]:
    """The plan as micro-task records in run order, or `PlanInvalid`.

    `done`: the ids a task may depend on beyond the plan's own (the MT ids, and planner
    ids, of micro-tasks completed before a re-plan) with their indices. New tasks get the
    ids MT-<first_number>, MT-<first_number + 1>, ... and indices after those."""
    try:
        answer = PlanAnswer.model_validate(json.loads(raw))
    except json.JSONDecodeError as e:
        raise PlanInvalid(f"the plan is not JSON: {e}") from None
    except ValidationError as e:
        raise PlanInvalid(f"the plan does not match the schema: {_error_list(e)}") from None
    checks = [c.step_id for c in mp.checks]
    for t in answer.tasks:  # `check-1`, `Check 02`, `3`: the id the prompt shows
        t.checks = [_check_id(c) for c in t.checks]
    ids = [t.id for t in answer.tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise PlanInvalid(f"task ids must be unique: {', '.join(dupes)} appear more than once")
    for t in answer.tasks:
        unknown = [d for d in t.depends_on if d not in ids and d not in done]
        if unknown:
            raise PlanInvalid(f"task {t.id!r} depends on {', '.join(map(repr, unknown))}, which is no task of the plan")
        bad = [c for c in t.checks if c not in checks]
        if bad:
            raise PlanInvalid(
                f"task {t.id!r} names check(s) {', '.join(map(repr, bad))}; the MP's checks are "
                f"{', '.join(checks) or 'none'}"
            )
        if checks and not t.checks:
            raise PlanInvalid(f"task {t.id!r} lists no check; every task must be accepted by at least one check")
        for f in t.files:
            if f.startswith("/") or ".." in f.split("/") or not f.isprintable():
                raise PlanInvalid(f"task {t.id!r} names file {f!r}; files are paths inside the repository")
    order = _topological(answer.tasks)
    base = first_number - 1
    index = {t.id: base + k for k, t in enumerate(order)}
    return [
        {
            "mt_id": f"MT-{base + k + 1:03d}",
            "ref": t.id,
            "title": t.title,
            "description": t.description,
            "after": sorted({index[d] if d in index else done[d] for d in t.depends_on}),
            "files": t.files,
            "domain": t.domain.lower() if t.domain else None,
            "checks": sorted({checks.index(c) for c in t.checks}),
            **({"pause": True} if t.pause else {}),
        }
        for k, t in enumerate(order)
    ]


def _check_id(name: str) -> str:
    m = CHECK_RE.match(name.strip())
    return f"check-{int(m.group(1)):03d}" if m else name


def _topological(tasks: list[PlannedTask]) -> list[PlannedTask]:
    """Dependency order, stable: the first task (in the planner's order) whose dependencies
    are placed comes next. A cycle is named."""
    placed: list[PlannedTask] = []
    left = list(tasks)
    local = {t.id for t in tasks}
    while left:
        names = {p.id for p in placed}
        ready = next((t for t in left if all(d in names or d not in local for d in t.depends_on)), None)
        if ready is None:
            raise PlanInvalid(f"the dependencies form a cycle among {', '.join(t.id for t in left)}")
        placed.append(ready)
        left.remove(ready)
    return placed


def task_text(rec: dict[str, Any]) -> str:
    """A planned task as the worker sees it (its files in backticks: the context compiler
    shows them)."""
    out = [rec["title"]]
    if rec["description"]:
        out += ["", rec["description"]]
    if rec["files"]:
        out += ["", "Files: " + ", ".join(f"`{f}`" for f in rec["files"])]
    return "\n".join(out)


def micro_tasks(records: list[dict[str, Any]], line: int = 0) -> list[MicroTask]:
    """The validated plan's records as micro-tasks."""
    return [
        MicroTask(
            r["mt_id"],
            int(r["mt_id"][3:]) - 1,
            line,
            task_text(r),
            r["domain"],
            tuple(r["after"]),
            tuple(r["checks"]),
            r["ref"],
            tuple(r["files"]),
            bool(r.get("pause")),
        )
        for r in records
    ]
