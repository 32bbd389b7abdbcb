"""How the loop stops: a pause (a stop signal, a usage or rate limit) that the engine
resumes later, NEED_INFO before it starts, and the halting certificate at its end; and
the progress snapshot `mp-engine status` shows."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from mp_engine.agent import certificate as cert
from mp_engine.agent.loopstate import LoopState
from mp_engine.agent.report import sections
from mp_engine.atomic import atomic_write_json
from mp_engine.execute.base import ExecResult
from mp_engine.execute.steps import error_output, report_for
from mp_engine.record.ledger import StepStatus
from mp_engine.record.outcome import read_capped


def iso_utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class EndMixin:
    """Part of `AgentRun` (loop.py)."""

    def pause(self, state: LoopState, kind: str, reason: str) -> ExecResult:
        if self.ctx.cancelled.is_set():  # not a pause: the MP was cancelled (inbox/cancel_request.py)
            return self.cancelled(state)
        self.progress.pause(kind, reason)
        self.emit("micro_task_pause_requested", "FR-EVT-MT-007", **self.where(state), kind=kind, reason=reason)
        self.publish(state)
        return ExecResult(status="interrupted")

    def cancelled(self, state: LoopState) -> ExecResult:
        """Stopped by a cancel request, between or during iterations: the partial work
        stays on the work branch (never landed), named in the result."""
        self.progress.data["status"] = "cancelled"
        self.publish(state)
        self.progress.save(durable=True)
        landing = self.work.land(self.cfg.land, exact=False)
        self.work.remove()
        self.emit("micro_task_loop_cancelled", "FR-EVT-MT-011", **self.where(state), reason="cancel request")
        return ExecResult(status="cancelled", extra={"work": landing.to_dict()})

    def wait(self, state: LoopState, kind: str, reason: str, resume_at: str) -> ExecResult:
        """BACKPRESSURE that pauses: persist `resume_at`; the engine re-enters after it."""
        self.progress.pause(kind, reason, resume_at)
        self.emit(
            "micro_task_pause_requested",
            "FR-EVT-MT-007",
            **self.where(state),
            kind=kind,
            reason=reason,
            resume_at=resume_at,
        )
        self.publish(state)
        return ExecResult(status="waiting", extra={"waiting": {"kind": kind, "reason": reason, "resume_at": resume_at}})

    def publish(self, state: LoopState, *, live: bool = False) -> None:
        """Write the progress snapshot (what `mp-engine status` shows)."""
        task = state.task
        now = time.time()
        current = {
            "active_mt": task.mt_id if task else None,
            "mt_number": state.mt_index + 1 if task else None,
            "micro_tasks": len(state.tasks),
            "iteration": (task.iterations + (1 if live else 0)) if task else None,
            "level": state.level,
            "level_name": state.levels[state.level].name if state.level < len(state.levels) else None,
            "residual": state.residual,
            "total_iterations": state.total,
            "iterations_left": self.cfg.max_iterations - state.total,
            "budget_seconds_left": round(self.budget.remaining(), 1),
            "budget_seconds_total": self.budget.total,
            "budget_source": self.budget.source,
            "total_escalations": state.escalations,
            "total_drop_backs": state.drop_backs,
            "calls_last_hour": self.limiter.used(now),
            "calls_per_hour": self.cfg.calls_per_hour,
            "breakers": state.breakers.to_dict(),
            "last_summary": state.last_summary,
            # Loopr's circuit: open when a breaker (or divergence) ended the run; the last trip
            # that escalated instead is kept to show why the level changed.
            "circuit": "open"
            if state.final is not None and state.final.reason.startswith(("breaker:", "residual_"))
            else "closed",
            "last_trip": state.last_trip,
            "done_signals": {"streak": state.done_streak, "needed": self.cfg.done_signals},
        }
        self.progress.data["current_state"] = current
        self.progress.data["micro_tasks"] = [
            {**t.to_dict(), "commit": self.progress.data.get("commits", {}).get(t.mt_id)} for t in state.tasks
        ]
        self.progress.data["plan"] = self.plan.summary(self.mp)
        self.progress.data["campaign"] = {
            "planned": state.planned,
            "pending": state.pending,
            "replans": state.replans,
            "drift_checks": state.drift_checks,
        }
        self.progress.data["residual_history"] = state.history
        self.progress.save()

    def need_info(self, reason: str, detail: str) -> ExecResult:
        c = cert.Certificate(cert.NEED_INFO, reason, detail, mt=None)
        (self.run_dir / "agent").mkdir(exist_ok=True)
        atomic_write_json(self.run_dir / "agent" / "certificate.json", c.to_dict())
        self.ctx.events.emit(
            "micro_task_loop_failed",
            id="FR-EVT-MT-010",
            mp=self.mp.mp_id,
            run=self.ctx.run.run_id,
            certificate=c.type,
            reason=reason,
        )
        return ExecResult(
            status="failed",
            diagnosis=cert.diagnosis(c, self.mp.mp_id),
            extra={"certificate": c.to_dict(), "sections": sections(c, None, self.plan, self.run_rel, [])},
        )

    def finish(self, state: LoopState) -> ExecResult:
        c = state.final
        assert c is not None
        p = self.progress
        p.data["certificate"] = c.to_dict()
        p.data["status"] = {cert.EXACT: "completed", cert.UNVERIFIED: "completed", cert.BACKPRESSURE: "cancelled"}.get(
            c.type, "failed"
        )
        p.data["completed_at"] = p.data["updated_at"]
        self.publish(state)
        p.save(durable=True)
        atomic_write_json(self.run_dir / "agent" / "certificate.json", c.to_dict())
        commits = self.work.task_commits()
        landing = self.work.land(self.cfg.land, exact=c.type == cert.EXACT)
        self.work.remove()
        self.emit(
            "micro_task_work_landed", "MPE-MT-WORK", branch=landing.branch, how=landing.how, commit=landing.commit
        )
        name, event_id = {
            cert.EXACT: ("micro_task_loop_completed", "FR-EVT-MT-009"),
            cert.UNVERIFIED: ("micro_task_loop_completed", "FR-EVT-MT-009"),
            cert.BACKPRESSURE: ("micro_task_loop_cancelled", "FR-EVT-MT-011"),
        }.get(c.type, ("micro_task_loop_failed", "FR-EVT-MT-010"))
        self.emit(
            name,
            event_id,
            mt=c.mt,
            iteration=state.tasks[state.mt_index].iterations if state.task else None,
            level=state.level,
            certificate=c.type,
            reason=c.reason,
            iterations=state.total,
        )
        checks = [report_for(self.ctx, chk, step) for chk, step in self.last_checks]
        extra = {
            "work": landing.to_dict(),
            "certificate": c.to_dict(),
            "agent": {
                "iterations": state.total,
                "escalations": state.escalations,
                "drop_backs": state.drop_backs,
                "micro_tasks": [{**t.to_dict(), "commit": commits.get(t.mt_id)} for t in state.tasks],
                "planned": state.planned,
                "replans": state.replans,
                "drift_checks": state.drift_checks,
                "progress": f"{self.run_rel}/agent/progress.json",
                "learnings": f"{self.run_rel}/agent/learnings.md",
            },
            "sections": [
                {"title": "Work branch", "body": landing.note},
                *sections(c, state, self.plan, self.run_rel, p.data["pauses"], self.distilled(state), commits),
            ],
        }
        if c.type in (cert.EXACT, cert.UNVERIFIED):
            return ExecResult(status="completed", checks=checks, extra=extra)
        res = ExecResult(
            status="failed",
            checks=checks,
            diagnosis=cert.diagnosis(c, self.mp.mp_id, fix=self.fatal_fix),
            extra=extra,
        )
        failing = [(chk, step) for chk, step in self.last_checks if step is None or step.status != StepStatus.COMPLETED]
        if failing:
            res.error_output, res.error_output_ref = error_output(self.ctx, failing[0][0])
        elif c.type == cert.BLOCKED and state.task and state.task.records:
            rec = state.task.records[-1]
            path = self.run_dir / rec["evidence"] / "stderr.txt"
            res.error_output, _ = read_capped(path, 16 * 1024)
            res.error_output_ref = f"{rec['evidence']}/stderr.txt" if res.error_output else None
        return res
