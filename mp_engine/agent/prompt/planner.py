"""The planner's prompt (issue #17): the goal, the repository's memory, the MP's checks, the
repository map; on a re-plan, what is done and why the last plan failed; and the one answer
block it must print (plan/planner.py validates it)."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.memory.lessons import prompt_section
from mp_engine.agent.plan.planner import MAX_TASKS
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.record.outcome import fenced


def schema_text(nonce: str) -> str:
    return f"""## Your answer (required)

Answer with exactly one plan block; nothing else you print is read:

<plan nonce="{nonce}">
{{"tasks": [
  {{"id": "short-id", "title": "one line", "description": "what to do, precisely",
    "depends_on": ["ids of tasks that must be done first"], "files": ["paths/in/the/repo"],
    "domain": "optional routing tag, e.g. docs", "checks": ["check-001"], "pause": false}}
]}}
</plan>

Rules: ids are unique (letters, digits, `.`, `_`, `-`); no dependency cycle; each task
lists the acceptance checks (by id, from the list above) that prove it done, at least one;
small tasks, each one commit; at most {MAX_TASKS} tasks. `"pause": true` stops the run before
that task until a person answers: set it where the goal asks a person to look first. Blocks without this exact nonce
are ignored.
"""


def prompt(
    *,
    mp: MicroProject,
    goal: str,
    nonce: str,
    repo_map: str,
    round_: int,
    done: list[dict[str, Any]],
    failure: str = "",
    previous_error: str = "",
    memory: str = "",
) -> str:
    """The planner's prompt: the goal, the repository's memory, the MP's checks, the repository map; on a re-plan,
    what is done and why the last plan failed (the failed checks' tails, the diff so far,
    the learnings, gathered by the caller into `failure`)."""
    out = [
        f"# Planning for mp-engine: {mp.mp_id}" + (f" (re-plan {round_})" if round_ else ""),
        "",
        "You plan; you do not change files. Split the goal into small tasks that coding agents",
        "carry out one at a time, each in a fresh session that sees only its task, its files",
        "and a repository map. The engine runs the acceptance checks itself to accept a task.",
        "",
        "## Goal",
        "",
        goal,
        "",
        *prompt_section(memory),  # SYSTEM/memory.md: what earlier MPs' checks taught
        "## Acceptance checks (run by the engine with bash in the repository root; exit 0 = pass)",
        "",
    ]
    for c in mp.checks:
        out += [f"{c.step_id}:", fenced(c.body, "bash"), ""]
    if not mp.checks:
        out += ["(none)", ""]
    if done:
        out += ["## Already done (do not plan these again; new tasks may depend on their ids)", ""]
        out += [f"- {d['mt_id']} ({d['ref']}): {d['title']}" for d in done] + [""]
    if failure:
        out += ["## Why the last plan must change", "", failure.rstrip(), ""]
    if repo_map:
        out += [repo_map.rstrip(), ""]
    out += [schema_text(nonce)]
    if previous_error:
        out += ["## Your previous answer was refused", "", previous_error, "", "Answer again with a valid plan.", ""]
    return "\n".join(out)
