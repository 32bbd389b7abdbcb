"""The loop's decisions, as a pure function of the iteration records.

`LoopState.apply(record)` takes one finished iteration (the payload of its ledger
artifact) and decides: micro-task done (dual gate passed), blocked, escalate, diverged,
breaker open, budget spent, or go on. The executor calls it live and acts on the effects
it returns (events, distillation); after a restart it replays the ledger's records
through it to rebuild exactly the same state, so the ledger stays the only truth.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mp_engine.agent.call.chain import chain_for
from mp_engine.agent.call.usage import Usage
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.decompose import Plan
from mp_engine.agent.state.answer import AnswerState
from mp_engine.agent.state.campaign import CampaignState, exhausted
from mp_engine.agent.state.model import Cursor, Effect, TaskState
from mp_engine.agent.state.pause import PauseState
from mp_engine.agent.state.tasks import GLOBAL_ENDS, ParallelState
from mp_engine.config import AgentConfig, AgentLevel


class LoopState(CampaignState, ParallelState, AnswerState, PauseState):
    def __init__(self, cfg: AgentConfig, plan: Plan, base_digest: str, planned: bool = False, parallel: bool = False):
        self.cfg = cfg
        self.chains = [chain_for(cfg, t.domain) for t in plan.tasks]  # each task's levels (routes)
        self.plan = plan
        self.failures: list[cert.Certificate] = []  # tasks that did not pass; the first decides
        self.tasks = [TaskState(t.mt_id, t.title) for t in plan.tasks]
        self.verified = bool(plan.check_from)  # the MP has checks: EXACT is possible
        # Parallel tasks (parallelstate.py): each started task has a cursor of its own and
        # `mt_index` is the task a record is about; otherwise one task at a time, one cursor.
        self.parallel = parallel
        self.cursor = Cursor(last_digest=base_digest)
        self.cursors: dict[int, Cursor] = {}
        self.applied = 0  # records applied so far (each record carries its own as `seq`)
        self.integrations = 0  # a parallel run's integrations (INT-<n> steps) so far
        if self.tasks and not parallel:
            self.tasks[0].status = "active"
        self.mt_index = 0
        self.total = 0
        self.escalations = 0
        self.drop_backs = 0
        self.history: list[dict[str, Any]] = []
        self.final: cert.Certificate | None = None
        self.last_summary: str | None = None  # the agent's last SUMMARY line
        self.last_trip: dict[str, Any] | None = None  # the last breaker or divergence that fired
        self.last_record: dict[str, Any] | None = None  # the last iteration's (the result shows its checks)
        self.fatal_fix: str | None = None  # the fix a call that could not work proposed (its record's)
        self.usage = Usage()  # tokens and dollars of its calls, as the CLIs reported them (usage.py)
        self.init_campaign(planned)  # plans and drift checks (campaignstate.py)

    # -- the cursor of the task in focus ---------------------------------------------

    @property
    def cur(self) -> Cursor:
        return self.cursors.setdefault(self.mt_index, Cursor()) if self.parallel else self.cursor

    level = property(lambda s: s.cur.level, lambda s, v: setattr(s.cur, "level", v))
    fails_at_level = property(lambda s: s.cur.fails_at_level, lambda s, v: setattr(s.cur, "fails_at_level", v))
    trend = property(lambda s: s.cur.trend, lambda s, v: setattr(s.cur, "trend", v))
    breakers = property(lambda s: s.cur.breakers)
    done_streak = property(lambda s: s.cur.done_streak, lambda s, v: setattr(s.cur, "done_streak", v))

    # -- views -----------------------------------------------------------------------

    @property
    def levels(self) -> tuple[AgentLevel, ...]:
        """The current micro-task's escalation chain."""
        return self.chains[self.mt_index] if self.mt_index < len(self.chains) else self.cfg.levels

    @property
    def dead(self) -> frozenset[int]:
        """The micro-tasks that failed or were skipped: no later task is held to their checks."""
        return frozenset(i for i, t in enumerate(self.tasks) if t.status in ("failed", "blocked", "skipped"))

    def checks_of(self, mt_index: int) -> list[int]:
        """The checks that accept task `mt_index` now: `Plan.own` when tasks run at once,
        `Plan.accepting` one at a time (each task held to the earlier ones' checks too)."""
        if self.parallel:
            return self.plan.own(mt_index, self.dead)
        return self.plan.accepting(mt_index, self.dead)

    @property
    def task(self) -> TaskState | None:
        return self.tasks[self.mt_index] if self.mt_index < len(self.tasks) else None

    @property
    def next_iteration(self) -> int:
        return (self.task.iterations if self.task else 0) + 1

    @property
    def residual(self) -> int | None:
        task = self.task
        return task.records[-1]["residual"] if task and task.records else None

    def best(self) -> dict[str, Any] | None:
        task = self.task
        if not task or not task.records:
            return None
        rec = min(reversed(task.records), key=lambda r: r["residual"])  # lowest, latest on a tie
        return {
            "mt": rec["mt"],
            "iteration": rec["iteration"],
            "level": rec["level"],
            "residual": rec["residual"],
            "failing": rec["failing"],
            "evidence": rec["evidence"],
        }

    def end(self, type_: str, reason: str, detail: str) -> cert.Certificate:
        if self.parallel and reason in GLOBAL_ENDS:
            return self.end_all(type_, reason, detail)
        task = self.task
        if task is not None and type_ != cert.EXACT:
            task.status = "blocked" if type_ == cert.BLOCKED else "failed"
        self.final = cert.Certificate(
            type=type_,
            reason=reason,
            detail=detail,
            mt=task.mt_id if task else None,
            residual=0 if type_ == cert.EXACT else self.residual,
            best=None if type_ == cert.EXACT else self.best(),
            residual_history=list(self.history),
            metrics=self.metric_bests(),
            environment=(self.last_record or {}).get("environment") if type_ != cert.EXACT else None,
        )
        return self.final

    def metric_bests(self) -> list[dict[str, Any]]:
        """Per metric check that ran: its metric, target and the value closest to it."""
        best: dict[str, dict[str, Any]] = {}
        for t in self.tasks:
            for r in t.records:
                for m in r.get("metrics", []):
                    if m["id"] not in best or m["distance"] <= best[m["id"]]["distance"]:
                        best[m["id"]] = {**m, "mt": r["mt"], "iteration": r["iteration"]}
        return list(best.values())

    # -- the decision ----------------------------------------------------------------

    def _where(self, rec: dict[str, Any]) -> dict[str, Any]:
        return {"mt": rec["mt"], "iteration": rec["iteration"], "level": rec["level"]}

    def _trip(self, rec: dict[str, Any]) -> dict[str, str] | None:
        """The breaker or divergence that fires on this failed iteration, or None.
        Divergence is Phuc's rule: the last `divergence_window` (3) residuals of the
        micro-task at this level each higher than the one before."""
        w = self.cfg.divergence_window
        tail = self.trend[-w:]
        if len(tail) == w and all(a < b for a, b in zip(tail, tail[1:], strict=False)):
            return {
                "reason": "residual_grew",
                "detail": f"The residual of {rec['mt']} grew {w - 1} times in a row: {' -> '.join(map(str, tail))}.",
            }
        tripped = self.breakers.tripped(self.cfg)
        if tripped:
            name, what = tripped
            return {"reason": f"breaker:{name}", "detail": f"Circuit breaker {name} opened on {rec['mt']}: {what}."}
        return None

    def _escalate(self, rec: dict[str, Any], cause: str) -> list[Effect]:
        """Move the micro-task to the next level (a fresh start: counters and trend reset);
        a hard gate there ends the MP BLOCKED."""
        from_level = self.level
        self.level += 1
        self.escalations += 1
        self.cur.restart()
        effects = [
            Effect(
                "event",
                "micro_task_escalated",
                "FR-EVT-MT-005",
                {
                    **self._where(rec),
                    "from_level": from_level,
                    "to_level": self.level,
                    "to": self.levels[self.level].name,
                    "cause": cause,
                },
            )
        ]
        if self.levels[self.level].hard_gate:
            why = (
                f"failed {self.cfg.fail_threshold} iterations"
                if cause == "fail_threshold"
                else f"escalated on {cause.replace('breaker:', 'circuit breaker ')}"
            )
            effects.append(
                Effect("event", "micro_task_hard_gate", "FR-EVT-MT-006", {**self._where(rec), "level": self.level})
            )
            effects += self._fail_task(
                cert.BLOCKED, "hard_gate", f"{rec['mt']} {why} at every level up to the hard gate."
            )
        return effects

    # -- moving on: the next runnable task, skips, the end ---------------------------

    def _fail_task(self, type_: str, reason: str, detail: str) -> list[Effect]:
        """The current micro-task did not pass (its chain gave up, or the agent is blocked):
        the tasks that need it are SKIPPED, and the loop goes on with the next runnable one.
        The first failure's certificate is the MP's, when no task is left. In a planned MP,
        a task whose chain gave up asks for a re-plan instead, while re-plans are left."""
        if exhausted(type_, reason) and self.can_replan():
            task = self.task
            assert task is not None
            task.status, task.note = "failed", f"its chain gave up ({reason}); re-planned"
            return self.request_replan("failed", task.mt_id, reason, detail)
        self.failures.append(self.end(type_, reason, detail))
        self.final = None
        effects: list[Effect] = []
        first = 0 if self.parallel else self.mt_index + 1
        for j in range(first, len(self.tasks)):  # all of them now: the result lists them
            self._skip_if_needs_failed(j, effects)
        return effects + self._advance()

    def _skip(self, j: int, why: str, effects: list[Effect]) -> None:
        self.tasks[j].status, self.tasks[j].note = "skipped", why
        effects.append(Effect("event", "micro_task_skipped", "FR-EVT-MT-016", {"mt": self.tasks[j].mt_id, "why": why}))

    def _skip_if_needs_failed(self, j: int, effects: list[Effect]) -> bool:
        """Skip pending task `j` when it needs one that did not pass (a task skipped just
        now counts too); True when it did."""
        gone = self.plan.needs(j) & self.dead
        if self.tasks[j].status != "pending" or not gone:
            return False
        self._skip(j, f"it needs {', '.join(self.tasks[d].mt_id for d in sorted(gone))}, which did not pass", effects)
        return True

    def _advance(self) -> list[Effect]:
        """Go on with the first pending micro-task after the current one whose needs passed
        (a pending task whose every check belongs to a task that did not pass is skipped:
        nothing could verify it); with none left, the MP ends. Parallel tasks are started
        by the scheduler: the MP ends when none is pending, running or being integrated."""
        if self.parallel:
            return self.settle()
        effects: list[Effect] = []
        j = self.mt_index + 1
        while j < len(self.tasks):
            if self.tasks[j].status == "pending" and not self._skip_if_needs_failed(j, effects):
                if self.verified and not self.plan.accepting(j, self.dead):
                    self._skip(j, "every check that accepts it belongs to a micro-task that did not pass", effects)
                else:
                    break
            j += 1
        self.mt_index = j
        self.cursor.restart()
        if self.task is None:
            self._finish()
            return effects
        self.task.status = "active"
        if self.level > 0:
            self.drop_backs += 1
            effects.append(
                Effect(
                    "event",
                    "micro_task_drop_back",
                    "FR-EVT-MT-014",
                    {"mt": self.task.mt_id, "iteration": 1, "level": 0, "from_level": self.level},
                )
            )
            self.level = 0
        return effects

    def _finish(self) -> None:
        if not self.failures and self.verify_at_end():
            return
        if self.failures:
            first = self.failures[0]
            self.final = replace(first, residual_history=list(self.history))
        elif not self.verified:  # `require_checks = false` and no check: the word alone
            self.end(
                cert.UNVERIFIED,
                "claims_only",
                f"All {len(self.tasks)} micro-task(s) were claimed done, but the MP has no check: "
                "nothing verified the work (`[agent] require_checks = false`).",
            )
        else:
            self.end(cert.EXACT, "all_checks_passed", f"All {len(self.tasks)} micro-task(s) passed the dual gate.")

    def apply_fatal(self, rec: dict[str, Any]) -> None:
        """A call that cannot work (auth, not found, an outage): the run ends BLOCKED with
        the fix its record proposes (caller.why_fatal)."""
        fatal = rec["fatal"]
        if self.parallel and rec.get("mt_index") is not None:
            self.mt_index = rec["mt_index"]
        self.end(cert.BLOCKED, fatal["reason"], fatal["detail"])
        self.fatal_fix = fatal["fix"]
        self.applied += 1
        if self.parallel:
            self.stop_live(f"the agent CLI of another task cannot work ({fatal['reason']})")

    def apply(self, rec: dict[str, Any]) -> list[Effect]:
        """Account one finished iteration; return what the executor must do about it."""
        self.usage.add(rec, task=rec["mt"], level=rec.get("level_name") or str(rec["level"]))
        effects = self._apply(rec)
        if self.final is None and (ceiling := self.cfg.max_cost_usd) is not None and self.usage.cost >= ceiling:
            self.end(cert.TIMEOUT, "cost_budget",
                     f"The agent calls cost ${self.usage.cost:.4f}, the MP's budget (`[agent] max_cost_usd`) "
                     f"is ${ceiling:g}, before every micro-task passed.")  # fmt: skip
        task = self.tasks[rec["mt_index"]] if self.parallel else None
        if task is not None and task.status in ("failed", "blocked") and task.ended_at is None:
            task.ended_at = rec.get("at")
        return effects

    def _apply(self, rec: dict[str, Any]) -> list[Effect]:
        if self.parallel:
            self.mt_index = rec["mt_index"]
        task = self.task
        assert task is not None and self.final is None
        effects: list[Effect] = []
        self.last_record = rec
        self.applied += 1
        self.total += 1
        task.iterations += 1
        if rec["level"] not in task.levels:
            task.levels.append(rec["level"])
        task.records.append(rec)
        self.history.append({**self._where(rec), "residual": rec["residual"]})
        cur = self.cur
        newly_passing = set(rec["passed"]) - cur.prev_passed
        progress = rec["digest"] != cur.last_digest or bool(newly_passing)
        if any(not m["met"] for m in rec.get("metrics", [])) and cur.trend:
            # A metric goal: progress is the distance shrinking (a residual below the best so
            # far at this level) or a check newly passing; a diff that moves nothing is not.
            progress = bool(newly_passing) or rec["residual"] < min(cur.trend)
        cur.last_digest, cur.prev_passed = rec["digest"], set(rec["passed"])
        rec_progress = {**self._where(rec), "progress": progress}
        self.done_streak = self.done_streak + 1 if rec.get("claimed", rec["gate"]) else 0
        self.last_summary = rec.get("summary") or self.last_summary

        if rec["gate"] and self.done_streak < self.cfg.done_signals:
            # Checks pass and the agent says done, but `done_signals` asks it to say so again.
            effects.append(
                Effect(
                    "event",
                    "micro_task_done_signal",
                    "",
                    {**rec_progress, "signals": self.done_streak, "needed": self.cfg.done_signals},
                )
            )
            self._out_of_iterations(rec)
            return effects
        if rec["gate"] and self.parallel:  # accepted in its worktree: the integrator decides
            task.status = "accepted"
            return effects + [Effect("integrate", fields={"mt_index": self.mt_index})]
        if rec["gate"]:
            task.status, task.final_level = "completed", rec["level"]
            effects.append(Effect("event", "micro_task_complete", "FR-EVT-MT-004", {**rec_progress}))
            if rec["level"] > 0:
                effects.append(Effect("distill", fields={"mt_index": self.mt_index}))
            effects += self._advance()
            self.drift_due()
            return effects

        if rec["blocked"]:
            effects.append(
                Effect(
                    "event", "micro_task_blocked", "FR-EVT-MT-017", {**rec_progress, "reason": rec["blocked_reason"]}
                )
            )
            return effects + self._fail_task(
                cert.BLOCKED,
                "agent_blocked",
                f"The agent reported being blocked on {rec['mt']}: {rec['blocked_reason']}",
            )

        self.fails_at_level += 1
        self.trend.append(rec["residual"])
        self.breakers.observe(
            progress=progress, error=rec["error"], status_ok=rec["status_ok"], work_type=rec["work_type"]
        )
        # An open breaker or a diverging residual escalates where it can (a stronger model is
        # the first answer), and ends the MP DIVERGED only at the last level. Otherwise
        # `fail_threshold` failures at a level escalate.
        trip = self._trip(rec)
        can_escalate = self.level + 1 < len(self.levels)
        if trip is not None:
            self.last_trip = {**self._where(rec), **trip, "escalated": can_escalate}
        if trip is not None and not can_escalate:
            return effects + self._fail_task(cert.DIVERGED, trip["reason"], trip["detail"])
        if trip is not None or (self.fails_at_level >= self.cfg.fail_threshold and can_escalate):
            return effects + self._escalate(rec, trip["reason"] if trip else "fail_threshold")
        self._out_of_iterations(rec)
        return effects

    def _out_of_iterations(self, rec: dict[str, Any]) -> None:
        if self.total >= self.cfg.max_iterations:
            self.end(
                cert.TIMEOUT,
                "max_iterations",
                f"All {self.cfg.max_iterations} iterations (`[agent] max_iterations`) were spent before {rec['mt']} passed.",
            )
