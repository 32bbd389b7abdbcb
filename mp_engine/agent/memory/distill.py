"""Distillation candidates: when a micro-task that failed at a lower level succeeds at a
higher one, the failed attempt (student) and the successful one (teacher) are written to
`SYSTEM/distill/<run>_<MT>.json` (the spec's DistillationCandidate), for training the
cheaper model later, unless `[agent] distill = false`. Written once; a replay after a crash
does not rewrite it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from mp_engine.agent.call.chain import model_id
from mp_engine.agent.scope import RunScope
from mp_engine.agent.state.model import TaskState
from mp_engine.config.agent import AgentLevel
from mp_engine.core.atomic import atomic_write_json
from mp_engine.core.clock import now_iso
from mp_engine.core.workspace import Workspace

DISTILL_DIR = "distill"


def candidate_path(system_dir: Path, run_id: str, mt_id: str) -> Path:
    return Path(system_dir) / DISTILL_DIR / f"{run_id}_{mt_id}.json"


def outcome_of(record: dict[str, Any]) -> str:
    """The spec's student outcome for a failed iteration record."""
    if record["call"]["kind"] not in ("ok",):
        return "ERROR"
    return "VALIDATION_FAILED" if record["residual"] else "INCOMPLETE"


def write_candidate(
    path: Path,
    *,
    mp_id: str,
    run_id: str,
    mt_id: str,
    run_rel: str,
    student: dict[str, Any],
    student_model: str,
    student_iterations: int,
    teacher: dict[str, Any],
    teacher_model: str,
    teacher_iterations: int,
    failed_levels: list[dict[str, Any]],
    checks_ran: int,
) -> bool:
    """Write the candidate unless it exists; return True if written."""
    if path.exists():
        return False

    def refs(record: dict[str, Any]) -> dict[str, str]:
        return {
            "prompt_snapshot_ref": f"{run_rel}/{record['evidence']}/prompt.md",
            "output_snapshot_ref": f"{run_rel}/{record['evidence']}/stdout.txt",
        }

    data = {
        "schema_version": "1.0",
        "skill_log_entry_id": str(uuid.uuid4()),
        "created_at": now_iso(),
        "mt_id": mt_id,
        "wp_id": mp_id,
        "run_id": run_id,
        "student_attempt": {
            "model_id": student_model,
            "level": student["level"],
            **refs(student),
            "outcome": outcome_of(student),
            "iterations": student_iterations,
        },
        "teacher_success": {
            "model_id": teacher_model,
            "level": teacher["level"],
            **refs(teacher),
            "outcome": "VALIDATION_PASSED",
            "iterations": teacher_iterations,
        },
        "failed_levels": failed_levels,
        "task_type_tags": sorted({r for r in (student.get("work_type"), teacher.get("work_type")) if r}),
        "contributing_factors": student.get("failing", []),
        # The teacher's success was verified by the engine's own checks, not by its claim.
        "data_trust_score": 1.0 if checks_ran else 0.5,
        "distillation_eligible": True,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, data)
    return True


def distill(run: RunScope, *, task: TaskState, chain: tuple[AgentLevel, ...], announce: bool) -> None:
    """The distillation candidate of a micro-task a higher level solved after a lower one
    failed (`chain`: its own), announced when written now (FR-EVT-MT-015). None with
    `[agent] distill = false` (the spec's `enable_distillation`)."""
    if not run.cfg.distill:
        return
    ws, mp_id, run_id, run_rel = run.ws, run.mp.mp_id, run.run_id, run.run_rel
    teacher = task.records[-1]
    failed = [r for r in task.records if not r["gate"]]
    if not failed:
        return
    student_level = min(r["level"] for r in failed)
    student = [r for r in failed if r["level"] == student_level][-1]
    per_level: dict[int, int] = {}
    for r in failed:
        per_level[r["level"]] = per_level.get(r["level"], 0) + 1
    path = candidate_path(ws.system_dir, run_id, task.mt_id)
    written = write_candidate(
        path,
        mp_id=mp_id,
        run_id=run_id,
        mt_id=task.mt_id,
        run_rel=run_rel,
        student=student,
        student_model=model_id(chain[student_level]),
        student_iterations=per_level[student_level],
        teacher=teacher,
        teacher_model=model_id(chain[teacher["level"]]),
        teacher_iterations=sum(1 for r in task.records if r["level"] == teacher["level"]),
        failed_levels=[
            {
                "level": lv,
                "model_id": model_id(chain[lv]),
                "iterations": n,
                "outcome": outcome_of([r for r in failed if r["level"] == lv][-1]),
            }
            for lv, n in sorted(per_level.items())
        ],
        checks_ran=len(teacher.get("checks", [])),
    )
    if written and announce:
        run.emit(
            "micro_task_distillation_candidate",
            id="FR-EVT-MT-015",
            mt=task.mt_id,
            iteration=teacher["iteration"],
            level=teacher["level"],
            path=ws.rel(path),
        )


def distilled(ws: Workspace, run_id: str, tasks: list[TaskState]) -> list[str]:
    """The run's distillation candidates, relative to the workspace (for the result)."""
    paths = (candidate_path(ws.system_dir, run_id, t.mt_id) for t in tasks)
    return [ws.rel(p) for p in paths if p.exists()]
