"""Distillation candidates: a lower level's failure beside the higher level's success."""

from __future__ import annotations

import json

from mp_engine.agent.memory.distill import candidate_path, outcome_of, write_candidate


def record(level: int, *, ok_call: bool = True, residual: int = 1, work_type: str = "code") -> dict:
    return {
        "level": level,
        "call": {"kind": "ok" if ok_call else "crash"},
        "residual": residual,
        "evidence": f"agent/MT-001/iter-00{level + 1}",
        "work_type": work_type,
        "failing": ["check-001"] if residual else [],
    }


def test_the_student_outcome_follows_the_spec():
    assert outcome_of(record(0, ok_call=False)) == "ERROR"
    assert outcome_of(record(0, residual=2)) == "VALIDATION_FAILED"
    assert outcome_of(record(0, residual=0)) == "INCOMPLETE"


def test_a_candidate_is_written_once_with_refs_into_the_archive(tmp_path):
    path = candidate_path(tmp_path / "SYSTEM", "r1", "MT-001")
    kwargs = dict(
        mp_id="MP-2.1",
        run_id="r1",
        mt_id="MT-001",
        run_rel="SYSTEM/runs/r1",
        student=record(0),
        student_model="small-model",
        student_iterations=3,
        teacher=record(1, residual=0, work_type="tests"),
        teacher_model="big-model",
        teacher_iterations=1,
        failed_levels=[{"level": 0, "model_id": "small-model", "iterations": 3, "outcome": "VALIDATION_FAILED"}],
        checks_ran=1,
    )
    assert write_candidate(path, **kwargs)
    data = json.loads(path.read_text())
    assert data["student_attempt"]["prompt_snapshot_ref"] == "SYSTEM/runs/r1/agent/MT-001/iter-001/prompt.md"
    assert data["teacher_success"]["outcome"] == "VALIDATION_PASSED" and data["data_trust_score"] == 1.0
    assert data["task_type_tags"] == ["code", "tests"] and data["contributing_factors"] == ["check-001"]
    assert not write_candidate(path, **kwargs)  # a crash between success and candidate: written once
