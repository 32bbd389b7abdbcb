"""CI's verdict on a pull request the run opened (issue #41), as a record the run replays
like any other (`CI-<n>`, kind `ci`). Green ends nothing: the run stays EXACT. Red with
rounds left goes back into the same run: a task is added whose text is what the failing
checks said (their decisive lines), needing every task that completed before it and accepted by every
check of the MP, so the agent fixes and the engine pushes again. Red with the rounds used
up ends the run BLOCKED (`ci_failed`), quoting the failure; the pull request stays open for
a person."""

from __future__ import annotations

from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state.followup import follow_up, quoted
from mp_engine.agent.state.kinds import Effect
from mp_engine.agent.state.model import RunState

FIX, GIVE_UP = "fix", "give_up"  # forge/ci.py's steps that change the run (`done` and `wait` do not)
# The session ended otherwise (a person pushed onto the branch, the token lacks a permission,
# git or the forge said no): {"why", "detail", "fix"?}.
ENDED = "ended"


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
        url=rec.get("url") or None,
        **({"why": rec["why"]} if rec.get("why") else {}),
    )
    if rec["step"] == ENDED:
        s.final = cert.Certificate(cert.BLOCKED, rec["why"], rec["detail"], residual_history=list(s.history))
        s.fatal_fix = rec.get("fix") or s.fatal_fix  # the fix the ending proposes, over the reason's default
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


def _fix_task(s: RunState, rec: dict[str, Any]) -> list[Effect]:
    """A task that makes CI pass, after every task that completed (not those a re-plan
    replaced: they never complete), accepted by every check of the MP."""
    failing = ", ".join(rec.get("failing", [])) or "CI"
    task = follow_up(
        s,
        f"ci-{rec['round']}",
        f"Make CI pass on the pull request: {failing} failed (CI round {rec['round']})",
        "CI ran on the work you pushed and failed. What the failing checks said (the end of each log):\n\n"
        + quoted(rec.get("text") or "(no log)"),
    )
    return [Effect.event("micro_task_ci_fix", "MPE-MT-CI-FIX", mt=task.mt_id, round=rec["round"], failing=failing)]
