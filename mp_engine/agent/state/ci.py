"""CI's verdict on a pull request the run opened (issue #41), as a record the run replays
like any other (`CI-<n>`, kind `ci`). Green ends nothing: the run stays EXACT. Red with
rounds left goes back into the same run: a task is added whose text is what the failing
checks said (their decisive lines), needing every task that completed before it and accepted by every
check of the MP, so the agent fixes and the engine pushes again. Red with the rounds used
up ends the run BLOCKED (`ci_failed`), quoting the failure; the pull request stays open for
a person."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.call.chain import chain_for
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.planner import micro_tasks
from mp_engine.agent.state.kinds import Effect, TaskStatus
from mp_engine.agent.state.model import Cursor, RunState, TaskState

FIX, GIVE_UP = "fix", "give_up"  # forge/ci.py's steps that change the run (`done` and `wait` do not)
ENDED = "ended"  # the session ended otherwise (a person pushed onto the branch, the token lacks a permission)


def reduce_ci(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """`rec`: {"round", "sha", "state", "step", "checks": {name: conclusion}, "failing": [names],
    "text": what the failing checks said, "url": the pull request}."""
    s.applied += 1
    seen = Effect.event(
        "pull_request_ci",
        "MPE-PR-CI",
        round=rec["round"],
        sha=rec["sha"],
        state=rec["state"],
        step=rec["step"],
        failing=rec.get("failing", []),
    )
    if rec["step"] == ENDED:
        s.final = cert.Certificate(cert.BLOCKED, rec["why"], rec["detail"], residual_history=list(s.history))
        return [seen]
    if rec["step"] == GIVE_UP:
        names = ", ".join(rec.get("failing", [])) or rec["state"]
        s.final = cert.Certificate(
            cert.BLOCKED,
            "ci_failed",
            f"CI on the pull request ({rec.get('url') or rec['sha'][:12]}) still failed after {rec['round']} "
            f"push(es): {names}. The pull request stays open for a person.",
            residual_history=list(s.history),
        )
        return [seen]
    if rec["step"] != FIX:
        return [seen]
    return [seen, *_fix_task(s, rec)]


def _quoted(text: str) -> str:
    """CI's words as an indented block: a log's own headings never end the task's text."""
    return "\n".join("    " + line for line in text.splitlines())


def _fix_task(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """A task that makes CI pass, after every task that completed (not those a re-plan
    replaced: they never complete), accepted by every check of the MP."""
    n = len(s.tasks)
    failing = ", ".join(rec.get("failing", [])) or "CI"
    planned = {
        "mt_id": f"MT-{n + 1:03d}",
        "ref": f"ci-{rec['round']}",
        "title": f"Make CI pass on the pull request: {failing} failed (CI round {rec['round']})",
        "description": "CI ran on the work you pushed and failed. What the failing checks said (the end of each "
        "log):\n\n" + _quoted(rec.get("text") or "(no log)"),
        "after": [i for i, t in enumerate(s.tasks) if t.status is TaskStatus.COMPLETED],
        "checks": sorted({k for k in range(len(s.plan.check_from))}),
        "files": [],
        "domain": None,
    }
    new = micro_tasks([planned])
    s.plan = s.plan.extended(new)
    s.chains += [chain_for(s.cfg, t.domain) for t in new]
    s.tasks.append(TaskState(new[0].mt_id, new[0].title))
    s.final = None
    if not s.isolated:  # one at a time: it works on where the last task left the run's worktree
        s.tasks[n].status = TaskStatus.ACTIVE
        s.cursors[n] = Cursor(last_digest=s.cur.last_digest, prev_passed=set(s.cur.prev_passed))
        s.focus = n
    return [Effect.event("micro_task_ci_fix", "MPE-MT-CI-FIX", mt=new[0].mt_id, round=rec["round"], failing=failing)]
