"""How the loop comes back (after a pause, a restart or `kill -9`), part of `AgentRun`:
the state is the replay of the ledger's records (iterations, planning rounds, drift
checks, in the order they ran), and the run says where it resumes (FR-EVT-MT-008,
WF-RECOVERY)."""

from __future__ import annotations

from mp_engine.agent import certificate as cert
from mp_engine.agent.loopstate import LoopState
from mp_engine.record.ledger import StepStatus, read_artifact


class ResumeMixin:
    """Part of `AgentRun` (loop.py)."""

    def replay(self, state: LoopState) -> None:
        """Rebuild the loop state from the records in the ledger: iterations, planning
        rounds and drift checks, in the order they ran."""
        for step in self.ctx.ledger.model.steps:
            if state.final is not None:
                return
            if step.kind not in ("agent", "plan", "drift") or step.status not in (
                StepStatus.COMPLETED,
                StepStatus.FAILED,
            ):
                continue
            rec = read_artifact(self.ctx.run.steps_dir, step)
            if rec is None:
                continue
            if rec.get("fatal"):
                state.end(cert.BLOCKED, rec["fatal"]["reason"], rec["fatal"]["detail"])
                self.fatal_fix = rec["fatal"]["fix"]
            elif step.kind == "plan":
                state.apply_plan(rec)
            elif step.kind == "drift":
                state.apply_drift(rec)
            elif "mt" in rec:
                state.apply(rec)
                self.remember_checks(rec)

    def report_resume(self, state: LoopState) -> None:
        """After a pause or a crash: say where the loop resumes (FR-EVT-MT-008, WF-RECOVERY)."""
        pause = self.progress.resumed()
        if pause is not None:
            self.emit("micro_task_resumed", "FR-EVT-MT-008", **self.where(state), after=pause.get("kind"))
        recoveries = self.ctx.ledger.model.recoveries
        seen = self.progress.data.get("recoveries_seen", 0)
        for rec in recoveries[seen:]:
            self.emit(
                "workflow_recovery",
                "FR-EVT-WF-RECOVERY",
                **self.where(state),
                resume_point=self.step_id(state) if state.task else None,
                steps_recovered=rec["steps_recovered"],
                steps_to_retry=rec["steps_to_retry"],
                reason=rec["reason"],
            )
        self.progress.data["recoveries_seen"] = len(recoveries)
        for i, task in enumerate(state.tasks):  # a crash may have come between success and candidate
            if task.status == "completed" and (task.final_level or 0) > 0:
                self.distill(state, i, emit=False)
        self.progress.save()
