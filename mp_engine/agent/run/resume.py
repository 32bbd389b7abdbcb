"""How the agent run comes back (after a pause, a restart or `kill -9`): the loop's state
is the replay of the ledger's records (iterations, planning rounds, drift checks, in the
order they ran), and the run says where it resumes (FR-EVT-MT-008, WF-RECOVERY)."""

from __future__ import annotations

from pathlib import Path

from mp_engine.agent.run.progress import Progress
from mp_engine.agent.run.publisher import where
from mp_engine.agent.run.steps import iteration_step
from mp_engine.agent.state.loopstate import LoopState
from mp_engine.agent.state.model import Emit
from mp_engine.record.ledger import Ledger, StepStatus, read_artifact

REPLAYED = ("agent", "plan", "drift", "start", "integrate", "answer")


def records(ledger: Ledger, steps_dir: Path) -> list[tuple[str, dict]]:
    """(kind, record) of every finished step the loop decided on, in the order it applied
    them: by `seq` (parallel tasks finish in any order; the run records the order it
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


def replay(state: LoopState, ledger: Ledger, steps_dir: Path) -> None:
    """Rebuild the loop state from the records in the ledger (their artifacts in
    `steps_dir`), in the order they were applied."""
    for kind, rec in records(ledger, steps_dir):
        if kind == "answer":  # a person answered the task the run ended on: it goes on (answers.py)
            state.apply_answer(rec)
        elif state.final is not None:
            continue
        elif rec.get("fatal"):
            state.apply_fatal(rec)
        elif kind == "plan":
            state.apply_plan(rec)
        elif kind == "drift":
            state.apply_drift(rec)
        elif kind == "start":
            state.apply_start(rec)
        elif kind == "integrate":
            state.apply_integration(rec)
        elif "mt" in rec:
            state.apply(rec)


def report_resume(state: LoopState, progress: Progress, ledger: Ledger, emit: Emit) -> None:
    """After a pause or a crash: say where the loop resumes (FR-EVT-MT-008, WF-RECOVERY)."""
    pause = progress.resumed()
    if pause is not None:
        emit("micro_task_resumed", "FR-EVT-MT-008", **where(state), after=pause.get("kind"))
    recoveries = ledger.model.recoveries
    seen = progress.data.get("recoveries_seen", 0)
    for rec in recoveries[seen:]:
        emit(
            "workflow_recovery",
            "FR-EVT-WF-RECOVERY",
            **where(state),
            resume_point=iteration_step(state.task.mt_id, state.next_iteration) if state.task else None,
            steps_recovered=rec["steps_recovered"],
            steps_to_retry=rec["steps_to_retry"],
            reason=rec["reason"],
        )
    progress.data["recoveries_seen"] = len(recoveries)
