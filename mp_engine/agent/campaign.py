"""The steps between iterations (issue #17): planning and drift checks, part of `AgentRun`.

A planning round is ledger step `PLAN-<n>_iter-<attempt>` (kind `plan`), a drift check
`DRIFT-<n>` (kind `drift`); each one's artifact is the record `LoopState.apply_plan` or
`apply_drift` takes, so after a crash the ledger replays them with the iterations. The
planner's and the reflector's calls go through the same call path as a worker's (retries,
usage limits, the hourly limit, scrubbed environment), with their evidence under
`agent/PLAN-<n>/` and `agent/DRIFT-<n>/`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from mp_engine.agent import learnings, planning, workcontext
from mp_engine.agent.claims import parse_verdict
from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.invoke import Call
from mp_engine.agent.loopstate import LoopState
from mp_engine.agent.recording import iter_check
from mp_engine.config import AgentLevel
from mp_engine.execute.base import ExecResult
from mp_engine.execute.steps import run_block
from mp_engine.record.ledger import LedgerStep, idempotency_key, write_artifact
from mp_engine.record.outcome import fenced

FATAL = ("auth", "billing", "not_found", "transient", "config")


class CampaignMixin:
    """Part of `AgentRun` (loop.py)."""

    def campaign_step(self, state: LoopState) -> ExecResult | None:
        """The pending planning round or drift check; an ExecResult only to pause."""
        if state.pending == "plan":
            return self.plan_step(state)
        return self.drift_step(state)

    # -- planning ----------------------------------------------------------------------

    def plan_step(self, state: LoopState) -> ExecResult | None:
        level = self.cfg.planner
        assert level is not None
        name, attempt = f"PLAN-{state.plan_round + 1}", state.plan_attempt + 1
        ev = IterationEvidence(self.run_dir, name, attempt)
        step_id = f"{name}_iter-{attempt:03d}"
        text = self.prompt_once(ev, step_id, lambda: self.planner_prompt(state))
        step = self.start_step(step_id, "plan", name, str(attempt), hashlib.sha256(text.encode()).hexdigest())
        self.publish(state, live=True)
        self.emit("campaign_planning", "MPE-PLAN-START", round=state.plan_round, attempt=attempt, agent=level.name)
        call = self.call(state, level, step, ev, name, attempt)
        paused = self.side_call_paused(state, step, ev, call, level, "planner")
        if paused is not None or state.final is not None:
            return paused
        rec: dict[str, Any] = {"round": state.plan_round, "attempt": attempt, "evidence": ev.rel}
        try:
            raw = planning.extract(self.read_output(ev), self.progress.nonce)
            rec["tasks"] = planning.validate(raw, self.mp, state.completed_ids(), len(state.tasks) + 1)
        except planning.PlanInvalid as e:
            ended = f" (the planner's call ended `{call.kind}`: {call.detail})" if call.kind != "ok" else ""
            rec["invalid"] = str(e) + ended
        self.finish_step(step, ev, rec, call, ok="invalid" not in rec)
        self.act(state, state.apply_plan(rec))
        return None

    def planner_prompt(self, state: LoopState) -> str:
        done = [
            {"mt_id": t.mt_id, "ref": state.plan.tasks[i].ref or t.mt_id, "title": t.title}
            for i, t in enumerate(state.tasks)
            if t.status == "completed"
        ]
        parts = {
            "mp": self.mp,
            "goal": state.plan.goal,
            "nonce": self.progress.nonce,
            "round_": state.plan_round,
            "done": done,
            "failure": self.replan_failure(state),
            "previous_error": state.plan_error,
        }
        return workcontext.fill(
            self.cfg.token_budget, lambda context: planning.prompt(repo_map=context, **parts), "", self.worktree_map
        )

    def replan_failure(self, state: LoopState) -> str:
        """Why a re-plan: the cause, the failed task's failing checks' output tails, the
        diff so far and the end of the learnings."""
        cause = state.replan_cause
        if cause is None:
            return ""
        out = [f"{cause['mt'] or 'The plan'}: {cause['detail']}"]
        failed = next((t for t in state.tasks if t.mt_id == cause["mt"]), None)
        if failed is not None and failed.records:
            for check_id, tail in self.failing_tails(failed.records[-1]).items():
                out += ["", f"{check_id} failed; the end of its output:", fenced(tail or "(no output)")]
        diff = self.worktree.diffstat(self.base, self.worktree.snapshot()).rstrip()
        out += ["", "The diff so far:", fenced(diff)]
        notes = learnings.read(self.learnings_path).strip()
        if notes:
            out += ["", "The learnings so far (the end):", "", notes[-4 * self.cfg.output_tail_bytes :]]
        return "\n".join(out)

    # -- drift -------------------------------------------------------------------------

    def drift_step(self, state: LoopState) -> ExecResult | None:
        at, name = state.drift_at, f"DRIFT-{len(state.drift_checks) + 1}"
        step = self.start_step(name, "drift", name, str(at))
        self.emit("campaign_drift_check_started", "MPE-DRIFT-START", at=at)
        if at == 100:  # the final check of a planned MP: all of the MP's checks
            which = list(range(len(self.mp.checks)))
        elif state.planned:  # the checks of every completed task, again
            which = sorted(
                {
                    k
                    for i in state.current_tasks()
                    if state.tasks[i].status == "completed"
                    for k in state.plan.accepting(i)
                }
            )
        else:  # a listed MP: each task is held to the earlier ones' checks already; the reflector asks
            which = []
        ran, regressed = [], []
        for k in which:
            chk = iter_check(self.mp.checks[k], name)
            run = run_block(self.checks_ctx, chk)
            if run.interrupted or run.cancelled:
                self.release(step)
                return self.pause(state, "stop", "a stop signal interrupted the drift check; it runs again")
            ran.append(chk.check_id)
            if not run.ok:
                regressed.append(chk.check_id)
        rec: dict[str, Any] = {"at": at, "checks": ran, "regressed": regressed, "reflector": None}
        ev = IterationEvidence(self.run_dir, name, 1)
        level = self.cfg.reflector
        if level is not None and at < 100:
            ev.write("prompt.md", self.reflection_prompt(state, at, regressed))
            call = self.call(state, level, step, ev, name, 1)
            paused = self.side_call_paused(state, step, ev, call, level, "reflector")
            if paused is not None or state.final is not None:
                return paused
            rec["reflector"] = parse_verdict(self.read_output(ev), self.progress.nonce)
            rec["evidence"] = ev.rel
        rec["drift"] = bool(regressed) or (rec["reflector"] or {}).get("verdict") == "drifted"
        self.finish_step(step, ev, rec, None, ok=not rec["drift"])
        self.act(state, state.apply_drift(rec))
        return None

    def reflection_prompt(self, state: LoopState, at: int, regressed: list[str]) -> str:
        done = [f"- {t.mt_id}: {t.title}" for i, t in enumerate(state.tasks) if t.status == "completed"]
        snap = self.worktree.snapshot()
        nonce = self.progress.nonce
        return "\n".join(
            [
                f"# Drift check for mp-engine: {self.mp.mp_id}, {at} % of the tasks done",
                "",
                "You review; you do not change files. Does the completed work serve the original goal?",
                "",
                "## The original goal",
                "",
                state.plan.goal,
                "",
                "## Completed tasks",
                "",
                *done,
                "",
                "## What changed so far",
                "",
                fenced(self.worktree.diffstat(self.base, snap).rstrip()),
                "",
                "Checks that regressed: " + (", ".join(regressed) or "none"),
                "",
                "## Your answer (required; nothing else is read)",
                "",
                f'<aligned nonce="{nonce}">why the work serves the goal</aligned>',
                "or, when it does not:",
                f'<drifted nonce="{nonce}">how it strays from the goal, and what the plan must change</drifted>',
                "",
                "Blocks without this exact nonce are ignored.",
                "",
            ]
        )

    # -- shared ------------------------------------------------------------------------

    def start_step(self, step_id: str, kind: str, *key_parts: str) -> LedgerStep:
        """Start ledger step `step_id`, keyed by the SHA-256 of `key_parts` (an iteration's:
        MT id, iteration, level, prompt hash)."""
        key = idempotency_key(*key_parts)
        step = self.ctx.ledger.ensure_step(step_id, kind, key)
        step.idempotency_key = key
        self.ctx.ledger.start(step)
        return step

    def finish_step(
        self, step: LedgerStep, ev: IterationEvidence, rec: dict[str, Any], call: Call | None, *, ok: bool
    ) -> None:
        for out in ("stdout.txt", "stderr.txt", "call.json"):
            if ev.path(out).exists():
                ev.add(ev.path(out))
        ev.write_json("record.json", rec)
        ev.write_manifest()
        ref = write_artifact(self.ctx.run.steps_dir, step, rec, durable=False)
        self.ctx.ledger.finish(step, ok=ok, output_ref=ref, error=rec.get("invalid"))
        self.checkpoint()
        if call is not None:
            self.budget.charge(call.duration)

    def side_call_paused(
        self, state: LoopState, step: LedgerStep, ev: IterationEvidence, call: Call, level: AgentLevel, role: str
    ) -> ExecResult | None:
        """A planner's or reflector's call that did not answer: a pause, or the end (the CLI
        cannot work: BLOCKED, as for a worker)."""
        if call.kind == "interrupted":
            self.release(step)
            return self.pause(state, "stop", f"a second stop signal killed the {role}'s call; it runs again")
        if call.kind == "usage_limit":
            self.release(step)
            assert call.resume_at is not None
            return self.wait(state, "usage_limit", call.detail or "the provider's usage limit", call.resume_at)
        if call.kind in FATAL:
            self.fatal(state, step, ev, call, level, f"the {role} ({level.name})", f"[agent.{role}]")
        return None
