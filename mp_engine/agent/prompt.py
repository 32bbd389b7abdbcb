"""The prompt of one iteration: fresh every time, built from artifacts only.

No chat history is carried over. What the agent knows about earlier iterations comes
from files: the previous iteration's check results and output tails (run archive), the
learnings file, and the budget computed from the ledger.

Built for prompt caching (issue #16): what stays the same for a micro-task comes first (the
rules, the goal, the micro-task, the checks, the completion protocol with the run's nonce),
then the learnings of earlier micro-tasks (fixed while this one runs), then what often
repeats (the failing checks' output: an iteration often fails as the one before it did),
then this micro-task's learnings (appended to), then what changes every iteration (its
number and level, how the previous call ended, the budget). A provider's prefix cache then
holds everything up to the newest learnings entry; `bench prompts` measures the share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mp_engine.agent.decompose import MicroTask, Plan
from mp_engine.agent.learnings import split as split_learnings
from mp_engine.inbox.mpfile import Block, MicroProject
from mp_engine.record.outcome import fenced


@dataclass
class Budget:
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


def build(
    *,
    mp: MicroProject,
    plan: Plan,
    task: MicroTask,
    iteration: int,
    level: int,
    level_name: str,
    nonce: str,
    workspace: str,
    checks: list[Block],
    previous: dict[str, Any] | None,
    tails: dict[str, str],
    learnings: str,
    budget: Budget,
    context: str = "",
    statuses: dict[str, str] | None = None,
    answers: list[dict[str, str]] | None = None,
) -> str:
    n = len(plan.tasks)
    out = [
        f"# Task from mp-engine: {mp.mp_id} {task.mt_id} (micro-task {task.index + 1} of {n})",
        "",
        f"You work in the repository at {workspace}. Change files only inside it. Do not edit",
        "SESSION_STATE.json, mp-engine.toml, Claude_Inbox/ or SYSTEM/: they belong to the engine.",
        "",
        "## Goal of the whole MP",
        "",
        plan.goal or mp.title or mp.mp_id,
        "",
        f"## Your micro-task now: {task.mt_id}",
        "",
        task.text,
        "",
    ]
    for qa in answers or []:  # the run ended on this task's question; a person answered (issue #32)
        out += ["## You asked; a person answered", "", "Your question:", fenced(qa["question"], "text"), "",
                "The answer:", fenced(qa["answer"], "text"), ""]  # fmt: skip
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
        out += [f"- {t.mt_id}{shown.get(state_of.get(t.mt_id, ''), '')}: {t.title}" for t in others] + [""]
    out += ["## Acceptance checks", ""]
    if checks:
        out += ["The engine runs these in the workspace root with bash after you finish; each must exit 0.", ""]
        for c in checks:
            out += [f"{c.step_id}:", fenced(c.body, "bash"), ""]
    else:
        out += ["(none: the MP has no checks; your claim is recorded but nothing verifies it)", ""]
    earlier, this_mt = split_learnings(learnings, task.mt_id)
    out += [protocol(nonce)]
    if context:  # the task's files and the repository map (workcontext.py): they change rarely
        out += [context.rstrip("\n"), ""]
    out += ["## Learnings from earlier micro-tasks", "", earlier.strip() or "(none yet)", ""]
    out += ["## The previous iteration", ""]
    if previous is None:
        out += ["This is the first iteration of this micro-task.", ""]
    else:
        # The failing checks' output first: when an iteration fails as the one before it
        # did, these lines are the same and stay in the cached prefix.
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
        "## Budget",
        "",
        f"{budget.iterations_left} of {budget.max_iterations} iterations left for the MP{esc}; "
        f"about {int(budget.seconds_left)} of {int(budget.seconds_total)} seconds left.",
        "",
    ]
    return "\n".join(out)
