"""The prompt of one iteration: fresh every time, built from artifacts only.

No chat history is carried over. What the agent knows about earlier iterations comes
from files: the previous iteration's check results and output tails (run archive), the
learnings file, and the budget computed from the ledger.

Built for prompt caching (issues #16, #34): what all micro-tasks of the MP share comes first
(the rules, the completion protocol with the run's nonce, the goal, the repository's memory,
the list of micro-tasks, every check of the MP, the files the MP names and the repository
map), then the learnings file's entries (appended to, never rewritten but by compaction),
then what one micro-task adds (which it is, its text, its workspace, where the others stand,
which checks accept it), then what one iteration adds (the failing checks' output: an
iteration often fails as the one before it did; this task's learnings; its number and
level, how the previous call ended, the budget). A provider's prefix cache then holds the
shared part from one task to the next (and for parallel tasks), and everything up to the
newest learnings entry from one iteration to the next; `bench prompts` measures the share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mp_engine.agent.memory.lessons import prompt_section
from mp_engine.agent.plan.decompose import MicroTask, Plan
from mp_engine.agent.prompt.learnings import split as split_learnings
from mp_engine.agent.prompt.learnings import without_title
from mp_engine.inbox.mpfile import Block, MicroProject
from mp_engine.record.outcome import fenced


@dataclass
class Remaining:
    iterations_left: int
    max_iterations: int
    seconds_left: float
    seconds_total: float
    fails_before_escalation: int | None  # None at the last level


def protocol(nonce: str) -> str:
    return f"""## Completion protocol (required)

Your output is read by a program. Your claims are checked: the engine runs the acceptance
checks itself after you finish, and only a claim AND passing checks complete the task.

End every answer with this status block, filled in (copy the NONCE line exactly):

---LOOPR_STATUS---
NONCE: {nonce}
STATUS: IN_PROGRESS | COMPLETE | BLOCKED | ERROR
EXIT_SIGNAL: true | false
WORK_TYPE: tests | code | docs | other
FILES_MODIFIED: <number of files you changed>
ERRORS: <number of errors you saw>
SUMMARY: <one line: what you did>
---END_LOOPR_STATUS---

When the micro-task is done (STATUS: COMPLETE, EXIT_SIGNAL: true), also print:
<mt_complete nonce="{nonce}">for each acceptance check: where the evidence is (file:line)</mt_complete>

If you cannot go on without help from a person, print instead (STATUS: BLOCKED):
<blocked nonce="{nonce}">what you need</blocked>

Blocks without this exact nonce are ignored.
"""


@dataclass(frozen=True)
class WorkerPrompt:
    """What one iteration's prompt says: the MP and its plan, the task and its checks, the
    iteration, its level, where it works, how the last iteration ended, what is left."""

    mp: MicroProject
    plan: Plan
    task: MicroTask
    iteration: int
    level: int
    level_name: str
    nonce: str
    workspace: str
    checks: list[Block]
    previous: dict[str, Any] | None
    tails: dict[str, str]
    learnings: str
    remaining: Remaining
    statuses: dict[str, str] | None = None
    answers: list[dict[str, str]] | None = None
    memory: str = ""
    review: list[dict[str, str]] | None = None  # the reviewer's requested changes on it (issue #42)


def build(p: WorkerPrompt, context: str = "") -> str:
    """The prompt: `shared()` (the same for every task of the MP), then what this task
    adds (`task_part`), then what this iteration adds (`iteration_part`)."""
    earlier, this_mt = split_learnings(p.learnings, p.task.mt_id)
    out = shared(mp=p.mp, plan=p.plan, nonce=p.nonce, memory=p.memory, context=context)
    out += ["## Learnings so far", "", without_title(earlier) or "(none yet)", ""]
    out += task_part(p.plan, p.task, p.workspace, p.checks, p.statuses, p.answers)
    out += review_part(p.review)
    out += iteration_part(p.task, p.iteration, p.level, p.level_name, p.previous, p.tails, this_mt, p.remaining)
    return "\n".join(out)


def shared(*, mp: MicroProject, plan: Plan, nonce: str, memory: str, context: str) -> list[str]:
    """What every prompt of the MP's micro-tasks starts with, byte for byte (issue #34): a
    provider's prefix cache serves it from one task to the next, and to parallel tasks."""
    out = [
        f"# Task from mp-engine: {mp.mp_id}",
        "",
        'You work in the repository named under "Your micro-task now". Change files only inside it. Do not edit',
        "SESSION_STATE.json, mp-engine.toml, Claude_Inbox/ or SYSTEM/: they belong to the engine.",
        "",
        protocol(nonce),
        "## Goal of the whole MP",
        "",
        plan.goal or mp.title or mp.mp_id,
        "",
    ]
    out += prompt_section(memory)  # SYSTEM/memory.md: what earlier MPs' verified outcomes taught
    out += [f"## The micro-tasks of this MP ({len(plan.tasks)})", ""]
    out += [f"- {t.mt_id}: {t.title}" for t in plan.tasks] + [""]
    out += ["## Acceptance checks of this MP", ""]
    if mp.checks:
        out += [
            'The engine runs a micro-task\'s checks (named under "Your micro-task now") in the workspace root '
            "with bash after you finish; each must exit 0.",
            "",
        ]
        for c in mp.checks:
            goal = f" (a goal: {c.metric}, the number on the last line of its output)" if c.metric else ""
            goal += f" ({c.expect})" if c.expect else ""  # stdout_contains / stdout_not_contains
            out += [f"{c.step_id}{goal}:", fenced(c.body, "bash"), ""]
    else:
        out += ["(none: the MP has no checks; your claim is recorded but nothing verifies it)", ""]
    if context:  # the files the MP names and the repository map (context.py): they change rarely
        out += [context.rstrip("\n"), ""]
    return out


def task_part(
    plan: Plan,
    task: MicroTask,
    workspace: str,
    checks: list[Block],
    statuses: dict[str, str] | None,
    answers: list[dict[str, str]] | None,
) -> list[str]:
    """What one micro-task adds: which it is, where, its text, what a person answered,
    where the others stand and which checks accept it."""
    out = [
        f"## Your micro-task now: {task.mt_id}",
        "",
        f"(micro-task {task.index + 1} of {len(plan.tasks)})",
        "",
        task.text,
        "",
        f"The repository: {workspace}",
        "",
    ]
    for qa in answers or []:  # the run ended on this task's question; a person answered (issue #32)
        out += [
            "## You asked; a person answered",
            "",
            "Your question:",
            fenced(qa["question"], "text"),
            "",
            "The answer:",
            fenced(qa["answer"], "text"),
            "",
        ]
    others = [t for t in plan.tasks if t.mt_id != task.mt_id]
    if others:
        out += ["## Other micro-tasks of this MP (context only: done before or after this one)", ""]
        shown = {
            "completed": " (done)",
            "skipped": " (skipped)",
            "failed": " (did not pass)",
            "blocked": " (did not pass)",
            "active": " (in progress at the same time, in another worktree)",
            "accepted": " (done, being integrated)",
        }
        state_of = statuses or {t.mt_id: "completed" for t in others if t.index < task.index}
        out += [f"- {t.mt_id}{shown.get(state_of.get(t.mt_id, ''), '') or ' (to do)'}" for t in others] + [""]
    out += [f"## The checks that accept {task.mt_id}", ""]
    out += [", ".join(c.step_id for c in checks) if checks else "(none)", ""]
    return out


def review_part(review: list[dict[str, str]] | None) -> list[str]:
    """The reviewer sent the task back (issue #42): its items, as the failing check `review`."""
    if not review:
        return []
    out = [
        "## The check `review` failed: the reviewer requested changes",
        "",
        "Every check passed, but a reviewer read the work before it landed and asks for these changes to",
        "this micro-task's work. Make them; the checks above must still pass, and the reviewer reads the",
        "work again.",
        "",
    ]
    out += [f"- {i['target']}: {i['change']}" for i in review]
    return [*out, ""]


def iteration_part(
    task: MicroTask,
    iteration: int,
    level: int,
    level_name: str,
    previous: dict[str, Any] | None,
    tails: dict[str, str],
    this_mt: str,
    budget: Remaining,
) -> list[str]:
    """What one iteration adds: how the previous one ended (its failing checks' output
    first: an iteration often fails as the one before it did), the number, the budget.
    Long because it is the part's text, block by block, in the order the agent reads it."""
    out = ["## The previous iteration", ""]
    if previous is None:
        out += ["This is the first iteration of this micro-task.", ""]
    else:
        passed, failing = previous["passed"], previous["failing"]
        merged = previous.get("integration")
        if merged:  # parallel tasks: its accepted work did not integrate with the others'
            out += [
                "Your previous work on this micro-task passed its checks, but it could not join the work "
                f"integrated meanwhile by other micro-tasks: {merged['detail']}. Your workspace was reset to the "
                "integrated work: do this micro-task again on top of it.",
                "",
            ]
            if merged.get("diff"):
                out += ["The conflict, as git showed it:", fenced(merged["diff"], "diff"), ""]
        for check_id in failing:
            out += [f"{check_id} failed; the end of its output:", fenced(tails.get(check_id, "") or "(no output)"), ""]
    if this_mt.strip():
        out += [f"## Learnings of {task.mt_id} so far", "", this_mt.strip(), ""]
    out += [f"## This iteration: {iteration} of {task.mt_id}, level {level} ({level_name})", ""]
    if previous is not None:
        call = previous["call"]
        out.append(
            f"The previous one, iteration {previous['iteration']} (level {previous['level']}): the agent call ended "
            f"`{call['kind']}`"
            + (f" ({call['detail']})" if call.get("detail") else "")
            + f"; {len(passed)} of {len(passed) + len(failing)} checks passed."
        )
        if previous["claimed"] and failing:
            out.append("It claimed completion, but the checks did not confirm it.")
        elif not previous["claimed"] and not failing:
            out.append(
                "Every check passed, but no completion was claimed with the protocol above: if the "
                "micro-task is done, verify it and claim it; the checks run again after you finish."
            )
        if previous.get("status_problem"):
            out.append(f"Its status block was not accepted: {previous['status_problem']}.")
        out.append("")
    esc = (
        f"; {budget.fails_before_escalation} more failed iteration(s) at this level before escalation"
        if budget.fails_before_escalation is not None
        else ""
    )
    out += [
        "## Remaining",
        "",
        f"{budget.iterations_left} of {budget.max_iterations} iterations left for the MP{esc}; "
        f"about {int(budget.seconds_left)} of {int(budget.seconds_total)} seconds left.",
        "",
    ]
    return out
