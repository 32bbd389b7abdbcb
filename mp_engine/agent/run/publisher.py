"""Publishing the agent run: the progress snapshot `mp-engine status` shows, and how the
run stops. A pause (a stop signal, a usage or rate limit) the engine resumes later, a
cancel, NEED_INFO before it starts, and at its end the halting certificate, the landing
of its work branch and the result's sections.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from mp_engine.agent.call.chain import chain_for, runnable
from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.judge.checks import iter_check
from mp_engine.agent.memory import lessons
from mp_engine.agent.plan.decompose import Plan
from mp_engine.agent.progress import Progress
from mp_engine.agent.run import gates, limits
from mp_engine.agent.run.report import sections
from mp_engine.agent.run.workbranch import Landing, WorkBranch
from mp_engine.agent.scope import RunScope
from mp_engine.agent.state import ending
from mp_engine.agent.state.kinds import Emit
from mp_engine.agent.state.model import RunState
from mp_engine.config.agent import AgentConfig
from mp_engine.core.atomic import atomic_write_json, read_tail
from mp_engine.core.clock import parse_iso
from mp_engine.execute.base import ExecResult
from mp_engine.execute.sandbox import summary as sandbox_summary
from mp_engine.execute.steps import StepContext, error_output, report_for
from mp_engine.inbox.mpfile import MicroProject
from mp_engine.record.ledger import StepStatus
from mp_engine.record.outcome import read_capped

ANSWERABLE = ("agent_blocked", "hard_gate", "pause_point")  # endings a person's answer resumes (inbox/answer.py)
COMPLETED_BY = {cert.EXACT: "completed", cert.UNVERIFIED: "completed", cert.BACKPRESSURE: "cancelled"}
ENDED_EVENT = {
    cert.EXACT: ("micro_task_loop_completed", "FR-EVT-MT-009"),
    cert.UNVERIFIED: ("micro_task_loop_completed", "FR-EVT-MT-009"),
    cert.BACKPRESSURE: ("micro_task_loop_cancelled", "FR-EVT-MT-011"),
}


def iso_utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def where(state: RunState) -> dict[str, Any]:
    """The fields that place an event in the loop: the task, its next iteration, its level."""
    task = state.task
    return {"mt": task.mt_id if task else None, "iteration": state.next_iteration, "level": state.level}


def running_task(
    mt_id: str,
    level: int,
    level_name: str,
    iteration: int,
    output: Path,
    started_at: str | None,
    worktree: str,
    runs_on: str | None = None,
) -> dict[str, Any]:
    """A task running beside others, as `status` shows it: its level, iteration, seconds
    since it started and the last line its agent printed (in `output`); on a fleet,
    `runs_on`: "on <worker>", "queued on <queue>" or "waiting for Temporal at <address>"."""
    tail = read_tail(output, 2048).strip().splitlines()
    return {
        "mt": mt_id,
        "level": level,
        "level_name": level_name,
        "iteration": iteration,
        "started_at": started_at,
        "elapsed": round(time.time() - parse_iso(started_at).timestamp(), 1) if started_at else None,
        "last_line": (tail[-1] if tail else "")[:200],
        "worktree": worktree,
        **({"runs_on": runs_on} if runs_on else {}),
    }


def missing(cfg: AgentConfig, mp: MicroProject, plan: Plan, planned: bool) -> tuple[str, str] | None:
    """What the run lacks before it can start: (reason, detail) of its NEED_INFO, or None."""
    if planned and cfg.planner is None:
        return "no_planner", "The MP asks for a plan (`Plan: auto`), but mp-engine.toml has no `[agent.planner]` level."
    unrouted = [t.mt_id for t in plan.tasks if not runnable(chain_for(cfg, t.domain))]
    if unrouted or (not plan.tasks and not runnable(cfg.levels)):
        return (
            "no_levels",
            "No agent is configured"
            + (f" for {', '.join(unrouted)}" if unrouted and cfg.routes else "")
            + ": `[agent] levels` in mp-engine.toml is empty.",
        )
    if not mp.checks and cfg.require_checks:
        return (
            "no_checks",
            "The MP has no Validate checks, and `[agent] require_checks` is on: without checks "
            "nothing could prove the agent's work, and its word alone never suffices.",
        )
    return None


def need_info(
    reason: str, detail: str, *, mp: MicroProject, plan: Plan, run_dir: Path, run_rel: str, emit: Emit
) -> ExecResult:
    """NEED_INFO before the loop starts (no checks, no agent, no planner, no git)."""
    c = cert.Certificate(cert.NEED_INFO, reason, detail, mt=None)
    (run_dir / "agent").mkdir(exist_ok=True)
    atomic_write_json(run_dir / "agent" / "certificate.json", c.to_dict())
    emit("micro_task_loop_failed", id="FR-EVT-MT-010", certificate=c.type, reason=reason)
    return ExecResult(
        status="failed",
        diagnosis=cert.diagnosis(c, mp.mp_id),
        extra={"certificate": c.to_dict(), "sections": sections(c, None, plan, run_rel, [])},
    )


class Lander(Protocol):
    """How a run on another repository lands, and what the result says of it (run/repo.py)."""

    def land(self, exact: bool) -> Landing: ...

    def result(self) -> dict[str, Any]: ...


class Publisher:
    def __init__(self, run: RunScope, progress: Progress, work: WorkBranch, lander: Lander | None = None):
        """`lander`: how the work lands at the end (a configured repository's, issue #41);
        by default, on the channel's branch per `[agent] land`."""
        self.run = run
        self.cfg = run.cfg
        self.mp = run.mp
        self.run_dir = run.run_dir
        self.run_rel = run.run_rel
        self.progress = progress
        self.budget = run.budget
        self.limiter = run.limiter
        self.work = work
        self.cancel_requested = run.ctx.cancelled
        self.lander: Lander | None = lander

    # -- the snapshot ------------------------------------------------------------------

    def publish(self, state: RunState, *, live: bool = False, running: list[dict[str, Any]] | None = None) -> None:
        """Write the progress snapshot (what `mp-engine status` shows); `running`: the
        tasks running at once (parallel tasks), each with its level, iteration, elapsed
        seconds and last output line."""
        task = state.task
        data = self.progress.data
        if state.isolated:
            data["running"] = running or []
        data["current_state"] = {
            "active_mt": task.mt_id if task else None,
            "mt_number": state.focus + 1 if task else None,
            "micro_tasks": len(state.tasks),
            "iteration": (task.iterations + (1 if live else 0)) if task else None,
            "level": state.level,
            "level_name": state.levels[state.level].name if state.level < len(state.levels) else None,
            "residual": state.residual,
            "total_iterations": state.total,
            "iterations_left": self.cfg.max_iterations - state.total,
            "budget_seconds_left": round(self.budget.remaining(), 1),
            "budget_seconds_total": self.budget.total,
            "budget_source": self.budget.describe,
            "total_escalations": state.escalations,
            "total_drop_backs": state.drop_backs,
            "calls_last_hour": self.limiter.used(time.time()),
            "calls_per_hour": self.cfg.calls_per_hour,
            "breakers": state.cur.breakers.to_dict(),
            "last_summary": state.last_summary,
            # Loopr's circuit: open when a breaker (or divergence) ended the run; the last trip
            # that escalated instead is kept to show why the level changed.
            "circuit": "open"
            if state.final is not None and state.final.reason.startswith(("breaker:", "residual_"))
            else "closed",
            "last_trip": state.last_trip,
            "done_signals": {"streak": state.cur.done_streak, "needed": self.cfg.done_signals},
        }
        data["micro_tasks"] = [{**t.to_dict(), "commit": data.get("commits", {}).get(t.mt_id)} for t in state.tasks]
        data["plan"] = state.plan.summary(self.mp)
        data["campaign"] = {
            "planned": state.campaign.planned,
            "pending": state.campaign.pending,
            "replans": state.campaign.replans,
            "drift_checks": state.campaign.drift_checks,
            **gates.progress(state, self.mp),
        }
        data["residual_history"] = state.history
        data["usage"] = state.usage.to_dict()
        self.progress.save()

    def committed(self, mt_id: str, sha: str) -> None:
        """A micro-task's commit on the work branch, for `status` while the run goes on."""
        self.progress.data.setdefault("commits", {})[mt_id] = sha

    # -- stops -------------------------------------------------------------------------

    def pause(self, state: RunState, kind: str, reason: str) -> ExecResult:
        if self.cancel_requested.is_set():  # not a pause: the MP was cancelled (inbox/cancel_request.py)
            return self.cancelled(state)
        self.progress.pause(kind, reason)
        self.run.emit("micro_task_pause_requested", id="FR-EVT-MT-007", **where(state), kind=kind, reason=reason)
        self.publish(state)
        return ExecResult(status="interrupted")

    def wait(
        self, state: RunState, kind: str, reason: str, resume_at: str, *, announced: bool = False, polled: bool = False
    ) -> ExecResult:
        """BACKPRESSURE that pauses: persist `resume_at`; the engine re-enters after it.
        `announced`: the pause's event was emitted already (a level's usage limit, when hit).
        `polled`: a wait the run looks at again at each entry (a pull request's CI, the forge
        or a remote away): said once when it begins and once when it ends (`end_poll`),
        never per look; the result's `waiting` says `polled`, and `again` for a look that
        found it going on."""
        going_on = self.progress.polling()
        if polled and going_on is not None and going_on["kind"] != kind:
            self.end_poll(state)  # another wait begins: the one before is over
        new = self.progress.pause(kind, reason, resume_at, polled=polled)
        if new and not announced:
            self.run.emit(
                "micro_task_pause_requested",
                id="FR-EVT-MT-007",
                **where(state),
                kind=kind,
                reason=reason,
                resume_at=resume_at,
            )
        self.publish(state)
        waiting: dict[str, Any] = {"kind": kind, "reason": reason, "resume_at": resume_at}
        if polled:
            waiting.update(polled=True, **({} if new else {"again": True}))
        return ExecResult(status="waiting", extra={"waiting": waiting})

    def end_poll(self, state: RunState) -> None:
        """The polled wait that went on is over (CI said its word, the forge or the remote
        is back): the run says it resumed, once (FR-EVT-MT-008)."""
        ended = self.progress.end_poll()
        if ended is not None:
            self.run.emit("micro_task_resumed", id="FR-EVT-MT-008", **where(state), after=ended["kind"])
            self.progress.save()

    def cancelled(self, state: RunState) -> ExecResult:
        """Stopped by a cancel request, between or during iterations: the partial work
        stays on the work branch (never landed), named in the result."""
        self.progress.data["status"] = "cancelled"
        self.publish(state)
        self.progress.save(durable=True)
        landing = self._land(exact=False)
        self.work.remove()
        self.run.emit("micro_task_loop_cancelled", id="FR-EVT-MT-011", **where(state), reason="cancel request")
        return ExecResult(status="cancelled", extra={"work": landing.to_dict()})

    # -- the end -----------------------------------------------------------------------

    def finish(self, state: RunState, ctx: StepContext, distilled: list[str]) -> ExecResult:
        """The run's end: its certificate, its work landed (or not), the result's parts."""
        c = state.final
        assert c is not None
        p = self.progress
        p.data["certificate"] = c.to_dict()
        p.data["status"] = COMPLETED_BY.get(c.type, "failed")
        p.data["completed_at"] = p.data["updated_at"]
        if state.isolated:
            ending.overlaps(state)
        self.publish(state)
        p.save(durable=True)
        atomic_write_json(self.run_dir / "agent" / "certificate.json", c.to_dict())
        commits = self.work.task_commits()
        landing = self._land(exact=c.type == cert.EXACT)
        self.work.remove()
        self.run.emit(
            "micro_task_work_landed", id="MPE-MT-WORK", branch=landing.branch, how=landing.how, commit=landing.commit
        )
        name, event_id = ENDED_EVENT.get(c.type, ("micro_task_loop_failed", "FR-EVT-MT-010"))
        self.run.emit(
            name,
            id=event_id,
            mt=c.mt,
            iteration=state.task.iterations if state.task else None,
            level=state.level,
            certificate=c.type,
            reason=c.reason,
            iterations=state.total,
        )
        last_checks = self._last_checks(state, ctx)
        checks = [report_for(ctx, chk, step) for chk, step in last_checks]
        extra = self._extra(state, ctx, landing, commits, distilled)
        if c.type in (cert.EXACT, cert.UNVERIFIED):
            return ExecResult(status="completed", checks=checks, extra=extra)
        if c.reason == "plan_cancelled":  # a person answered `cancel` to the plan: no halt (issue #42)
            return ExecResult(status="cancelled", checks=checks, extra=extra)
        if (plan := gates.answerable(state, self.mp)) is not None:  # a plan waits for approval
            extra["answerable"] = plan
        elif c.type == cert.BLOCKED and c.reason in ANSWERABLE and c.mt:  # a person can answer: the run goes on
            extra["answerable"] = {"mt": c.mt, "question": c.detail}
        diagnosis = cert.diagnosis(c, self.mp.mp_id, fix=state.fatal_fix)
        res = ExecResult(status="failed", checks=checks, diagnosis=diagnosis, extra=extra)
        failing = [(chk, step) for chk, step in last_checks if step is None or step.status != StepStatus.COMPLETED]
        if failing:
            res.error_output, res.error_output_ref = error_output(ctx, failing[0][0])
        elif c.type == cert.BLOCKED and state.task and state.task.records:
            rec = state.task.records[-1]
            path = self.run_dir / rec["evidence"] / "stderr.txt"
            res.error_output, _ = read_capped(path, 16 * 1024)
            res.error_output_ref = f"{rec['evidence']}/stderr.txt" if res.error_output else None
        return res

    def _land(self, *, exact: bool) -> Landing:
        if self.lander is not None:
            return self.lander.land(exact)
        return self.work.land(self.cfg.land, exact=exact)

    def _extra(
        self, state: RunState, ctx: StepContext, landing: Landing, commits: dict[str, str], distilled: list[str]
    ) -> dict[str, Any]:
        """What the result carries of the run: its work, certificate, usage, tasks, lessons
        and sections."""
        c = state.final
        assert c is not None
        carried = lessons.carried(self.run_dir, self.run_rel)
        pauses = self.progress.data["pauses"]
        extra: dict[str, Any] = {
            "work": landing.to_dict(),
            "certificate": c.to_dict(),
            "usage": state.usage.to_dict(),
            "agent": {
                "iterations": state.total,
                "escalations": state.escalations,
                "drop_backs": state.drop_backs,
                "micro_tasks": [{**t.to_dict(), "commit": commits.get(t.mt_id)} for t in state.tasks],
                "planned": state.campaign.planned,
                "replans": state.campaign.replans,
                "drift_checks": state.campaign.drift_checks,
                "progress": f"{self.run_rel}/agent/progress.json",
                "learnings": f"{self.run_rel}/agent/learnings.md",
                "memory": carried,
            },
            "lessons": lessons.of_run(state.tasks, self.mp, ctx.run.steps_dir) if self.cfg.memory else [],
            "sections": [
                {"title": "Work branch", "body": landing.note},
                *sections(c, state, state.plan, self.run_rel, pauses, distilled, commits, carried),
            ],
        }
        extra.update(gates.result(state))  # plan approval and the reviewer (issue #42)
        extra["agent"]["approvals"] = extra.pop("approvals", [])
        extra["sections"] += gates.sections(state, self.run_rel)
        if extra["lessons"]:  # finalize adds them to SYSTEM/memory.md
            body = "\n".join(f"- {ln}" for ln in extra["lessons"])
            extra["sections"].append({"title": "Lessons for SYSTEM/memory.md", "body": body})
        extra["protected"], extra["budget"] = limits.protected(state), limits.budget(self.run.spending, state)
        extra["sections"] += limits.sections(extra["protected"], extra["budget"])  # issue #42
        if self.lander is not None:  # the repository the work is on, and its pull request
            extra["pull_request"] = self.lander.result()
        confined = sandbox_summary(ctx.config.agent)
        if confined is not None:  # what ran in the sandbox; each call's rules are in its evidence
            extra["sandbox"] = confined
            extra["sections"].append({"title": "Sandbox", "body": confined["said"]})
        return extra

    def _last_checks(self, state: RunState, ctx: StepContext) -> list[tuple[Any, Any]]:
        """The checks of the last iteration that ran, with their ledger steps: the result's."""
        rec = state.last_record
        if rec is None:
            return []
        steps = {s.step_id: s for s in ctx.ledger.model.steps}
        blocks = {b.step_id: b for b in self.mp.checks}
        prefix = f"{rec['mt']}_iter-{rec['iteration']:03d}"
        return [
            (iter_check(blocks[c["id"]], prefix), steps.get(c["step"]))
            for c in rec.get("checks", [])
            if c["id"] in blocks
        ]
