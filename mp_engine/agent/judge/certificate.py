"""Halting certificates: why the loop ended, with the evidence to prove it.

    EXACT         every micro-task passed the dual gate (claim + all its checks): COMPLETED
    TIMEOUT       the iteration or time budget is spent; carries the best iteration
    DIVERGED      the residual grew `divergence_window` times in a row, or a circuit
                  breaker opened (the loop will not converge by itself), or a drift check
                  found drift with no re-plan left
    BLOCKED       the agent said it is blocked, the hard gate was reached, the planner gave
                  no valid plan, a plan waits for approval, the reviewer still requests
                  changes, the agent CLI cannot work (auth, not installed, outage), or a
                  pull request's session ended (CI rounds used up, a person's push on its
                  branch, git or the forge said no): a person must act
    BACKPRESSURE  a STOP file in SYSTEM/, or a disk fuller than `[agent] max_disk_used`
                  (ends the MP); SIGTERM and usage limits are also
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

from collections.abc import Callable
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
    residual: float | None = None
    best: dict[str, Any] | None = None  # {mt, iteration, level, residual, evidence}
    residual_history: list[dict[str, Any]] = field(default_factory=list)
    # Metric checks (inbox/metric.py): per check, its metric, target and the best value reached.
    metrics: list[dict[str, Any]] = field(default_factory=list)
    # The last iteration's every command failed for a reason outside the task (structured.py).
    environment: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Certificate:
        return cls(**data)


def describe_metric(m: dict[str, Any]) -> str:
    """`coverage >= 0.9 (check-001): best 0.8, MT-001 iteration 2, not met`."""
    value = "no value" if m["value"] is None else f"{m['value']:g}"
    return (
        f"{m['name']} {m['op']} {m['target']:g} ({m['id']}): best {value}, {m['mt']} iteration {m['iteration']}, "
        + ("met" if m["met"] else "not met")
    )


@dataclass(frozen=True)
class _Ending:
    """What a certificate's diagnosis is written from."""

    cert: Certificate
    mp_id: str

    @property
    def where(self) -> str | None:
        return self.cert.mt

    @property
    def resend(self) -> str:
        return f"then send the MP again with `Approves: {self.mp_id}`"

    @property
    def answer(self) -> str:
        """How a person answers a run that asks (inbox/answer.py): the same run goes on."""
        return (
            f"`mp-engine answer {self.mp_id} 'TEXT'` on the engine host, or `mp-engine send --answer {self.mp_id} "
            f"FILE --repo URL` (MCP `answer`; an MP with `Answers: {self.mp_id}` does it too): the same run goes "
            f"on, on its branch"
        )

    @property
    def best(self) -> str:
        """The best iteration, as a sentence after the detail (or nothing)."""
        best = self.cert.best or {}
        if not best:
            return ""
        reached = "".join(f" {describe_metric(m)}." for m in self.cert.metrics if not m["met"])
        return (
            f" The best iteration was {best['mt']} iteration {best['iteration']} at level {best['level']} "
            f"with residual {best['residual']} (evidence: {best.get('evidence')}).{reached}"
        )

    @property
    def budget_knob(self) -> str:
        return "`[agent] max_iterations`" if self.cert.reason == "max_iterations" else "the MP's `Timeout:` header"

    @property
    def asked(self) -> str:
        """What a blocked agent asked for, shortened, in parentheses (or nothing)."""
        asked = self.cert.detail.split(": ", 1)[1] if ": " in self.cert.detail else ""
        return f" ({asked[:300]})" if asked else ""


@dataclass(frozen=True)
class _Rule:
    """`when` the certificate matches: the diagnosis's kind, summary, text and default fix."""

    when: Callable[[Certificate], bool]
    says: Callable[[_Ending], tuple[str, str, str, str]]
    own_fix: bool = False  # the rule's fix stands even when the ending record carries one


def _is(type_: str, reason: str | None = None) -> Callable[[Certificate], bool]:
    return lambda c: c.type == type_ and (reason is None or c.reason == reason)


# Ordered, the most specific first; the last one always applies (NEED_INFO: no checks).
RULES: list[_Rule] = [
    _Rule(
        lambda c: c.type in (DIVERGED, TIMEOUT) and bool(c.environment),
        lambda e: (
            "agent_environment",
            f"the agent's commands could not run on {e.where}",
            f"Every command the agent ran in its last iteration failed for a reason outside the task: "
            f"`{e.cert.environment}`. {e.cert.detail}{e.best}",
            "Make the agent CLI's command runner work on this host (for codex's sandbox helper, `mp-engine "
            f"doctor` says what is wrong), {e.resend}.",
        ),
    ),
    _Rule(
        _is(TIMEOUT),
        lambda e: (
            "agent_timeout",
            f"agent budget spent on {e.where} ({e.cert.residual} failing)",
            e.cert.detail + e.best,
            f"Raise {e.budget_knob} (or split {e.where} into smaller instructions), {e.resend}.",
        ),
    ),
    _Rule(
        lambda c: c.type == DIVERGED and c.reason.startswith("breaker:"),
        lambda e: (
            "agent_breaker",
            f"circuit breaker {e.cert.reason.split(':', 1)[1]} opened on {e.where}",
            e.cert.detail + e.best,
            f"Read the learnings and the last evidence of {e.where}, make its instruction more precise, {e.resend}.",
        ),
    ),
    _Rule(
        _is(DIVERGED, "drift"),
        lambda e: (
            "agent_drift",
            "the work drifted from the goal" + (f" ({e.where})" if e.where else ""),
            e.cert.detail,
            "Read the drift checks in the result, make the goal and its checks more precise (or raise "
            f"`[agent] max_replans`), {e.resend}.",
        ),
    ),
    _Rule(
        _is(DIVERGED),
        lambda e: (
            "agent_diverged",
            f"residual diverged on {e.where}",
            e.cert.detail + e.best,
            f"Split {e.where} into smaller instructions whose checks can pass one by one, {e.resend}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "pause_point"),
        lambda e: (
            "agent_paused",
            f"paused before {e.where}, as the MP asks",
            e.cert.detail,
            f"Look at the work so far (branch mp/{e.mp_id}), then answer to start {e.where} (the answer is in its "
            f"prompt; any text, e.g. `go on`): {e.answer}.",
        ),
    ),
    _Rule(  # issue #42: the plan waits for a person
        _is(BLOCKED, "plan_review"),
        lambda e: (
            "agent_plan_review",
            "the plan waits for approval",
            e.cert.detail,
            "Read the plan (the result's Plan section; the dashboard draws it), then answer `approve` to start it, "
            f"`cancel` to end the MP, or what to change (the planner re-plans with it): {e.answer}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "review_changes"),
        lambda e: (
            "agent_review_changes",
            "the reviewer still requests changes",
            e.cert.detail,
            f"Read the reviewer's items (the result's Review section; the work is on branch mp/{e.mp_id}); make them "
            f"clearer in the MP or raise `[agent] review_rounds`, {e.resend}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "review_failed"),
        lambda e: (
            "agent_review_failed",
            "the reviewer gave no verdict",
            e.cert.detail,
            "Make `[agent.reviewer]` answer (its prompt and output are in the run's agent/REVIEW-<n>/; it runs "
            f"read-only under bubblewrap: `mp-engine doctor` tests the sandbox), {e.resend}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "hard_gate"),
        lambda e: (
            "agent_hard_gate",
            f"hard gate reached on {e.where}",
            e.cert.detail + e.best,
            f"Answer it, saying how {e.where} goes on (or what to do instead): {e.answer}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "invalid_plan"),
        lambda e: (
            "agent_invalid_plan",
            "the planner gave no valid plan",
            e.cert.detail,
            "Use a stronger model as `[agent.planner]` (its answers are in the run's agent/PLAN-*/ evidence), or "
            f"write the MP as a numbered list with `Plan: list`, {e.resend}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "ci_failed"),
        lambda e: (
            "pull_request_ci_failed",
            "CI still failed on the pull request",
            e.cert.detail,
            f"Read the failing checks on the pull request and push a fix to its branch mp/{e.mp_id} (CI and a "
            f"reviewer take it from there), or say what to change in an MP with `Approves: {e.mp_id}`.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "branch_moved"),
        lambda e: (
            "pull_request_branch_moved",
            f"someone else pushed to mp/{e.mp_id}",
            e.cert.detail,
            f"Keep their work on another branch (or reset mp/{e.mp_id} to the engine's last push), then {e.resend}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "forge_auth"),
        lambda e: (
            "forge_auth",
            "the forge refused the engine's token",
            e.cert.detail,
            f"Give the token the permission the detail names (docs/PULL_REQUESTS.md), then {e.resend}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "pull_request_git"),
        lambda e: (
            "pull_request_git",
            "git failed on the pull request's branch",
            e.cert.detail,
            f"Fix what git names (the repository's remote, or the engine's mirror of it), {e.resend}.",
        ),
    ),
    _Rule(
        _is(BLOCKED, "pull_request_forge"),
        lambda e: (
            "pull_request_forge",
            "the forge refused a call of the pull request",
            e.cert.detail,
            f"Read the forge's answer, fix the repository's settings or the token it names, {e.resend}.",
        ),
    ),
    _Rule(  # the agent CLI could not work: its fix comes with the record (calling.fatal)
        lambda c: c.type == BLOCKED and c.reason.startswith("agent_") and c.reason != "agent_blocked",
        lambda e: (
            e.cert.reason,
            f"agent CLI failed ({e.cert.reason.removeprefix('agent_')}) on {e.where or 'the plan'}",
            e.cert.detail,
            e.resend,
        ),
    ),
    _Rule(
        _is(BLOCKED),
        lambda e: (
            "agent_blocked",
            f"agent blocked on {e.where}",
            e.cert.detail,
            f"Answer it{e.asked}: {e.answer}.",
        ),
        own_fix=True,
    ),
    _Rule(  # issue #42: `on_budget = "end"`
        _is(BACKPRESSURE, "budget"),
        lambda e: (
            "agent_budget",
            "the engine's agent budget is spent",
            e.cert.detail,
            "Wait for the reset the detail names, or raise `[agent] daily_cost_usd` / `monthly_cost_usd` (or set "
            f'`on_budget = "wait"` so MPs wait for the reset), {e.resend}.',
        ),
    ),
    _Rule(
        _is(BACKPRESSURE, "disk_usage"),
        lambda e: (
            "agent_backpressure",
            "stopped: the workspace's disk is too full",
            e.cert.detail,
            f"Free space on the workspace's file system (or raise `[agent] max_disk_used`), {e.resend}.",
        ),
    ),
    _Rule(
        _is(BACKPRESSURE),
        lambda e: (
            "agent_backpressure",
            "stopped by SYSTEM/STOP",
            e.cert.detail,
            f"Delete SYSTEM/STOP when the downstream system can take work again, {e.resend}.",
        ),
    ),
    _Rule(
        _is(NEED_INFO, "no_git"),
        lambda e: (
            "agent_need_info",
            "agent MP without a git workspace",
            e.cert.detail,
            "Make the workspace a git repository with a first commit (`git init && git add -A && git commit -m "
            f"init` in it, or `mp-engine init --remote URL`), {e.resend}.",
        ),
    ),
    _Rule(
        _is(NEED_INFO, "no_planner"),
        lambda e: (
            "agent_need_info",
            "a plan was asked for, but no planner is configured",
            e.cert.detail,
            "Add an `[agent.planner]` level to mp-engine.toml (docs/AGENT.md, Plans), or remove `Plan: auto` "
            f"so the MP's list items are its micro-tasks, {e.resend}.",
        ),
    ),
    _Rule(
        _is(NEED_INFO, "no_levels"),
        lambda e: (
            "agent_need_info",
            "no agent configured",
            e.cert.detail,
            f"Add an `[agent] levels` chain to mp-engine.toml (docs/AGENT.md has examples), {e.resend}.",
        ),
    ),
    _Rule(
        lambda c: True,
        lambda e: (
            "agent_need_info",
            "agent MP without checks",
            e.cert.detail,
            f"Add a `## Validate` section with at least one ```bash check that proves the work is done, {e.resend}.",
        ),
    ),
]


def diagnosis(cert: Certificate, mp_id: str, *, fix: str | None = None) -> Diagnosis:
    """The ERROR diagnosis of a non-EXACT certificate, with exactly one proposed fix
    (`fix`, when the record that ended the run carries one)."""
    rule = next(r for r in RULES if r.when(cert))
    kind, summary, text, default_fix = rule.says(_Ending(cert, mp_id))
    return Diagnosis(kind, summary, text, default_fix if rule.own_fix else fix or default_fix, cert.mt)
