"""Distillation candidates: when a micro-task that failed at a lower level succeeds at a
higher one, the failed attempt (student) and the successful one (teacher) are written to
`SYSTEM/distill/<run>_<MT>.json` (the spec's DistillationCandidate), for training the
cheaper model later. Written once; a replay after a crash does not rewrite it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import atomic_write_json
from mp_engine.core.clock import now_iso

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
