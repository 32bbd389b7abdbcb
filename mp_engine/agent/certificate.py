"""Halting certificates: why the loop ended, with the evidence to prove it.

    EXACT         every micro-task passed the dual gate (claim + all its checks): COMPLETED
    TIMEOUT       the iteration or time budget is spent; carries the best iteration
    DIVERGED      the residual grew `divergence_window` times in a row, or a circuit
                  breaker opened (the loop will not converge by itself), or a drift check
                  found drift with no re-plan left
    BLOCKED       the agent said it is blocked, the hard gate was reached, the planner gave
                  no valid plan, or the agent CLI cannot work (auth, not installed,
                  outage): a person must act
    BACKPRESSURE  a STOP file in SYSTEM/ (ends the MP); SIGTERM and usage limits are also
                  backpressure but only pause the loop, which resumes later
    NEED_INFO     no checks while `[agent] require_checks`, no agent chain configured, or a
                  plan asked for without `[agent.planner]`
    UNVERIFIED    every micro-task was claimed done, but the MP has no check at all
                  (`require_checks = false`): COMPLETED, but its work does not land

Every certificate except EXACT and UNVERIFIED ends the MP in ERROR, which halts the engine until an MP
with `Approves:` or `mp-engine approve`. The residual is the integer number of failing
checks of the micro-task.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mp_engine.record.diagnosis import Diagnosis

EXACT, TIMEOUT, DIVERGED, BLOCKED, BACKPRESSURE, NEED_INFO = (
    "EXACT",
    "TIMEOUT",
    "DIVERGED",
    "BLOCKED",
    "BACKPRESSURE",
    "NEED_INFO",
)
# Claimed done with no check to verify it (`[agent] require_checks = false`): the MP ends
# COMPLETED, but EXACT always means verified, and unverified work does not land.
UNVERIFIED = "UNVERIFIED"


@dataclass
class Certificate:
    type: str
    reason: str  # machine-readable, e.g. "max_iterations", "breaker:no_progress", "hard_gate"
    detail: str  # one sentence for people
    mt: str | None = None  # the micro-task the loop ended on
    residual: int | None = None
    best: dict[str, Any] | None = None  # {mt, iteration, level, residual, evidence}
    residual_history: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Certificate:
        return cls(**data)


def diagnosis(cert: Certificate, mp_id: str, *, fix: str | None = None) -> Diagnosis:
    """The ERROR diagnosis of a non-EXACT certificate, with exactly one proposed fix."""
    resend = f"then send the MP again with `Approves: {mp_id}`"
    where = cert.mt
    best = cert.best or {}
    best_text = (
        f" The best iteration was {best['mt']} iteration {best['iteration']} at level {best['level']} "
        f"with residual {best['residual']} (evidence: {best.get('evidence')})."
        if best
        else ""
    )

    def d(kind: str, summary: str, text: str, default_fix: str) -> Diagnosis:
        return Diagnosis(kind, summary, text, fix or default_fix, where)

    t, r = cert.type, cert.reason
    if t == TIMEOUT:
        knob = "`[agent] max_iterations`" if r == "max_iterations" else "the MP's `Timeout:` header"
        return d(
            "agent_timeout",
            f"agent budget spent on {where} ({cert.residual} failing)",
            cert.detail + best_text,
            f"Raise {knob} (or split {where} into smaller instructions), {resend}.",
        )
    if t == DIVERGED and r.startswith("breaker:"):
        return d(
            "agent_breaker",
            f"circuit breaker {r.split(':', 1)[1]} opened on {where}",
            cert.detail + best_text,
            f"Read the learnings and the last evidence of {where}, make its instruction more precise, {resend}.",
        )
    if t == DIVERGED and r == "drift":
        return d(
            "agent_drift",
            "the work drifted from the goal" + (f" ({where})" if where else ""),
            cert.detail,
            f"Read the drift checks in the result, make the goal and its checks more precise (or raise "
            f"`[agent] max_replans`), {resend}.",
        )
    if t == DIVERGED:
        return d(
            "agent_diverged",
            f"residual diverged on {where}",
            cert.detail + best_text,
            f"Split {where} into smaller instructions whose checks can pass one by one, {resend}.",
        )
    if t == BLOCKED and r == "hard_gate":
        return d(
            "agent_hard_gate",
            f"hard gate reached on {where}",
            cert.detail + best_text,
            f"Finish {where} by hand (or add a stronger level before the hard gate), {resend}.",
        )
    if t == BLOCKED and r == "invalid_plan":
        return d(
            "agent_invalid_plan",
            "the planner gave no valid plan",
            cert.detail,
            "Use a stronger model as `[agent.planner]` (its answers are in the run's agent/PLAN-*/ evidence), or "
            f"write the MP as a numbered list with `Plan: list`, {resend}.",
        )
    if t == BLOCKED and r.startswith("agent_") and r != "agent_blocked":  # the CLI could not work
        return d(
            r, f"agent CLI failed ({r.removeprefix('agent_')}) on {where or 'the plan'}", cert.detail, fix or resend
        )
    if t == BLOCKED:
        asked = cert.detail.split(": ", 1)[1] if ": " in cert.detail else ""
        give = f" ({asked[:300]})" if asked else ""
        return Diagnosis(
            "agent_blocked",
            f"agent blocked on {where}",
            cert.detail,
            f"Add what the agent asked for{give} to {where}'s instructions in the MP (or provide it in the "
            f"workspace), {resend}.",
            where,
        )
    if t == BACKPRESSURE:
        return d(
            "agent_backpressure",
            "stopped by SYSTEM/STOP",
            cert.detail,
            f"Delete SYSTEM/STOP when the downstream system can take work again, {resend}.",
        )
    if t == NEED_INFO and r == "no_git":
        return d(
            "agent_need_info",
            "agent MP without a git workspace",
            cert.detail,
            "Make the workspace a git repository with a first commit (`git init && git add -A && git commit -m "
            f"init` in it, or `mp-engine init --remote URL`), {resend}.",
        )
    if t == NEED_INFO and r == "no_planner":
        return d(
            "agent_need_info",
            "a plan was asked for, but no planner is configured",
            cert.detail,
            "Add an `[agent.planner]` level to mp-engine.toml (docs/AGENT.md, Plans), or remove `Plan: auto` "
            f"so the MP's list items are its micro-tasks, {resend}.",
        )
    if t == NEED_INFO and r == "no_levels":
        return d(
            "agent_need_info",
            "no agent configured",
            cert.detail,
            f"Add an `[agent] levels` chain to mp-engine.toml (docs/AGENT.md has examples), {resend}.",
        )
    return d(
        "agent_need_info",
        "agent MP without checks",
        cert.detail,
        f"Add a `## Validate` section with at least one ```bash check that proves the work is done, {resend}.",
    )
