"""How the agent run comes back (after a pause, a restart or `kill -9`): its state is the
replay of the ledger's records (iterations, planning rounds, drift checks, starts,
integrations, answers, in the order they were applied; state/apply.py), and the run says
where it resumes (FR-EVT-MT-008, WF-RECOVERY)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mp_engine.agent.progress import Progress
from mp_engine.agent.run.publisher import where
from mp_engine.agent.run.steps import iteration_step
from mp_engine.agent.state.kinds import REPLAYED, Emit
from mp_engine.agent.state.model import RunState
from mp_engine.record.ledger import Ledger, StepStatus, read_artifact


def records(ledger: Ledger, steps_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(step kind, record) of every finished step the run decided on, in the order it
    applied them: by `seq` (tasks at once finish in any order; the run records the order it
    applied them in), after any record older than `seq` in ledger order."""
    found = []
    for position, step in enumerate(ledger.model.steps):
        if step.kind not in REPLAYED or step.status not in (StepStatus.COMPLETED, StepStatus.FAILED):
            continue
        rec = read_artifact(steps_dir, step)
        if rec is not None:
            key = (1, rec["seq"]) if "seq" in rec else (0, position)
            found.append((key, step.kind, rec))
    return [(kind, rec) for _key, kind, rec in sorted(found, key=lambda f: f[0])]


def report_resume(state: RunState, progress: Progress, ledger: Ledger, emit: Emit) -> None:
    """After a pause or a crash: say where the loop resumes (FR-EVT-MT-008, WF-RECOVERY)."""
    pause = progress.resumed()
    if pause is not None and not pause.get("polled"):  # a polled wait says it ended when it does (Publisher.end_poll)
        emit("micro_task_resumed", id="FR-EVT-MT-008", **where(state), after=pause.get("kind"))
    recoveries = ledger.model.recoveries
    seen = progress.data.get("recoveries_seen", 0)
    for rec in recoveries[seen:]:
        emit(
            "workflow_recovery",
            id="FR-EVT-WF-RECOVERY",
            **where(state),
            resume_point=iteration_step(state.task.mt_id, state.next_iteration) if state.task else None,
            steps_recovered=rec["steps_recovered"],
            steps_to_retry=rec["steps_to_retry"],
            reason=rec["reason"],
        )
    progress.data["recoveries_seen"] = len(recoveries)
