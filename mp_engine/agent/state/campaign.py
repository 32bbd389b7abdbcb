"""The loop's decisions about plans and drift (issue #17), part of `LoopState`.

Like iterations, a planning round and a drift check are ledger steps whose artifact is a
record; `apply_plan` and `apply_drift` take those records live and again on replay, so the
state after a restart is the same. What they decide:

- A plan (`Plan: auto`): the planner's validated tasks join the plan and the loop goes on
  with the first of them. An invalid answer is asked again once (`plan_error` goes into
  the next prompt); a second invalid answer ends the MP BLOCKED `invalid_plan`.
- A re-plan: a task that exhausts its chain (hard gate, or divergence at its last level),
  or drift, asks the planner again, at most `[agent] max_replans` times. The tasks not done
  are dropped (SKIPPED, "replaced by re-plan N") and the new plan's tasks follow.
- Drift checks: at 25 %, 50 % and 75 % of a plan's tasks done (one check when a task
  passes several marks), and, in a planned MP, once more when every task passed (the MP's
  every check: EXACT is the whole MP). A regressed check, or the reflector's `drifted`,
  is drift: a re-plan, or DIVERGED `drift` when none is left.
"""

from __future__ import annotations

from typing import Any

from mp_engine.agent.call.chain import chain_for
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.planner import micro_tasks
from mp_engine.agent.state.model import Effect, TaskState


def exhausted(type_: str, reason: str) -> bool:
    """The task's chain gave up: the hard gate, or a divergence or breaker at its last level."""
    return reason == "hard_gate" or type_ == cert.DIVERGED


class CampaignState:
    """Part of `LoopState` (loopstate.py): uses its cfg, plan, tasks, chains, history, final."""

    def init_campaign(self, planned: bool) -> None:
        self.planned = planned
        self.pending: str | None = "plan" if planned else None  # "plan" | "drift": a step before the next iteration
        self.plan_round = 0  # 0: the first plan; N: the Nth re-plan
        self.plan_attempt = 0  # invalid answers in this round
        self.plan_error = ""  # why the last answer was refused (shown to the planner)
        self.replan_cause: dict[str, Any] | None = None
        self.replans: list[dict[str, Any]] = []
        self.drift_q = 0  # quarter marks (1..3) already checked in this plan
        self.drift_at = 0  # the pending drift check's mark, in percent
        self.drift_checks: list[dict[str, Any]] = []
        self.final_verified = False

    # -- views -----------------------------------------------------------------------

    def current_tasks(self) -> list[int]:
        """The tasks of the plan as it stands (not replaced by a re-plan)."""
        return [i for i, t in enumerate(self.tasks) if not t.replaced]

    def completed_ids(self) -> dict[str, int]:
        """The ids a re-plan's tasks may depend on: MT ids and planner ids of done tasks."""
        out: dict[str, int] = {}
        for i, t in enumerate(self.tasks):
            if t.status == "completed":
                out[t.mt_id] = i
                if self.plan.tasks[i].ref:
                    out[self.plan.tasks[i].ref] = i
        return out

    def can_replan(self) -> bool:
        return self.planned and len(self.replans) < self.cfg.max_replans

    # -- asking for a plan -----------------------------------------------------------

    def request_replan(self, kind: str, mt: str | None, reason: str, detail: str) -> list[Effect]:
        self.plan_round += 1
        self.pending, self.plan_attempt, self.plan_error = "plan", 0, ""
        self.replan_cause = {"kind": kind, "mt": mt, "reason": reason, "detail": detail}
        self.replans.append({"round": self.plan_round, "cause": kind, "mt": mt, "reason": reason, "detail": detail})
        return [
            Effect(
                "event",
                "campaign_replan_requested",
                "MPE-PLAN-REPLAN",
                {"round": self.plan_round, "cause": kind, "mt": mt, "reason": reason},
            )
        ]

    def apply_plan(self, rec: dict[str, Any]) -> list[Effect]:
        """Account one planning answer: valid (its tasks join the plan) or not."""
        self.applied += 1
        self.usage.add(rec, task="plan", level=rec.get("level_name", "planner"))
        where = {"round": rec["round"], "attempt": rec["attempt"]}
        if rec.get("invalid"):
            self.plan_attempt += 1
            self.plan_error = rec["invalid"]
            effects = [Effect("event", "campaign_plan_invalid", "MPE-PLAN-INVALID", {**where, "error": rec["invalid"]})]
            if self.plan_attempt >= 2:
                self.pending = None
                self.final = cert.Certificate(
                    cert.BLOCKED,
                    "invalid_plan",
                    "The planner's answer was refused twice"
                    + (f" (re-plan {rec['round']})" if rec["round"] else "")
                    + f"; the last time: {rec['invalid']}.",
                    residual_history=list(self.history),
                )
            return effects
        if rec["round"] > 0:
            for t in self.tasks:
                if t.status not in ("completed",) and not t.replaced:
                    t.replaced = True
                    if t.status in ("pending", "active", "accepted"):
                        t.status, t.note = "skipped", f"replaced by re-plan {rec['round']}"
            if self.replans:
                self.replans[-1]["tasks"] = [r["mt_id"] for r in rec["tasks"]]
        new = micro_tasks(rec["tasks"])
        first = len(self.tasks)
        self.plan = self.plan.extended(new)
        self.chains += [chain_for(self.cfg, t.domain) for t in new]
        self.tasks += [TaskState(t.mt_id, t.title) for t in new]
        self.pending, self.plan_attempt, self.plan_error, self.replan_cause = None, 0, "", None
        self.mt_index = first
        if not self.parallel:  # parallel tasks start when the scheduler starts them
            self.tasks[first].status = "active"
            self.cursor.level = 0
            self.cursor.restart()
        done = sum(1 for i in self.current_tasks() if self.tasks[i].status == "completed")
        self.drift_q = min(3, 4 * done // len(self.current_tasks()))
        return [
            Effect(
                "event",
                "campaign_plan_accepted",
                "MPE-PLAN",
                {
                    **where,
                    "micro_tasks": [{"mt": r["mt_id"], "ref": r["ref"], "after": r["after"]} for r in rec["tasks"]],
                },
            )
        ]

    # -- drift -----------------------------------------------------------------------

    def drift_due(self) -> None:
        """After a task passed: a drift check when it crossed a quarter mark of the plan."""
        if self.pending is not None or self.final is not None or not (self.planned or self.cfg.reflector):
            return
        current = self.current_tasks()
        done = sum(1 for i in current if self.tasks[i].status == "completed")
        q = min(3, 4 * done // len(current))
        if q > self.drift_q:
            self.drift_q, self.pending, self.drift_at = q, "drift", 25 * q

    def verify_at_end(self) -> bool:
        """Every task passed in a planned MP: the final drift check (all the MP's checks)
        comes first. True when it is now pending."""
        if self.planned and self.verified and not self.final_verified:
            self.pending, self.drift_at = "drift", 100
            return True
        return False

    def apply_drift(self, rec: dict[str, Any]) -> list[Effect]:
        self.applied += 1
        self.usage.add(rec, task="drift", level=rec.get("level_name", "reflector"))
        self.pending = None
        verdict = rec.get("reflector") or {}
        line = {
            "at": rec["at"],
            "checks": rec["checks"],
            "regressed": rec["regressed"],
            "reflector": verdict.get("verdict"),
            "why": verdict.get("why", ""),
            "drift": rec["drift"],
        }
        self.drift_checks.append(line)
        effects = [Effect("event", "campaign_drift_check", "MPE-DRIFT", line)]
        if not rec["drift"]:
            if rec["at"] == 100:
                self.final_verified = True
                self._finish()
            return effects
        detail = (
            f"Drift at {rec['at']} %: "
            + (f"{', '.join(rec['regressed'])} regressed" if rec["regressed"] else "")
            + ("; " if rec["regressed"] and verdict.get("verdict") == "drifted" else "")
            + (
                f"the reflector says the work drifted: {verdict.get('why')}"
                if verdict.get("verdict") == "drifted"
                else ""
            )
            + "."
        )
        if self.can_replan():
            active = self.task.mt_id if self.task and self.task.status == "active" else None
            return effects + self.request_replan("drift", active, "drift", detail)
        if self.task is not None and self.task.status == "active":
            self.task.status = "pending"  # it never ran
        self.final = cert.Certificate(cert.DIVERGED, "drift", detail, residual_history=list(self.history))
        return effects
