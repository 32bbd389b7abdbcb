"""RESULT_last.json and results.jsonl: the result as a program reads it (record/digest.py)."""

from __future__ import annotations

import json

from mp_engine import __version__
from mp_engine.record import digest
from mp_engine.record.diagnosis import Diagnosis, invalid_mp
from mp_engine.record.digest import read_index, write_digest
from mp_engine.record.outcome import Outcome, StepReport
from tests.unit.record.test_result import outcome as result_outcome


def outcome(run_id: str = "r1", **over) -> Outcome:
    return result_outcome(run_id, **{"duration": 1.23456, **over})


def test_result_last_json_has_the_documented_fields(ws):
    step = StepReport("step-001", "command", "make", 4, "failed", 2, 0.5, "o" * 5000, "boom\n", "steps/s.stdout")
    diag = Diagnosis("nonzero_exit", "exit 2 in step 1", "make failed.", "Fix the Makefile.", "step-001", 4)
    digest.write_last(ws, outcome(status="ERROR", steps=[step], diagnosis=diag, halt_token="MP-8.1"))
    doc = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert doc["schema"] == "mp-engine/result/1" and doc["status"] == "ERROR" and doc["mp_sha256"] == "ab" * 32
    assert doc["fix"] == "Fix the Makefile." and doc["approve_with"] == "Approves: MP-8.1"
    assert doc["diagnosis"]["kind"] == "nonzero_exit" and doc["diagnosis"]["line"] == 4
    [s] = doc["steps"]
    assert s["exit_code"] == 2 and s["duration"] == 0.5 and len(s["stdout_tail"]) <= digest.TAIL_CHARS + 5
    assert s["stdout_path"] == "SYSTEM/runs/r1/steps/s.stdout" and doc["commit_subject"].startswith("MP-8.1: ERROR")
    assert doc["certificate"] is None and doc["duration"] == 1.235
    assert (doc["specification"], doc["protocol_version"], doc["engine_version"]) == ("MP-1.3", "v1.0", __version__)


def test_an_invalid_mp_reads_as_refused_and_a_completed_one_has_nothing_to_approve(ws):
    digest.write_last(ws, outcome(status="ERROR", diagnosis=invalid_mp("no header", "Add one."), halt_token="r9"))
    assert json.loads((ws.system_dir / "RESULT_last.json").read_text())["status"] == "REFUSED"
    digest.write_last(ws, outcome(run_id="r2"))
    doc = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert doc["status"] == "COMPLETED" and doc["approve_with"] is None and doc["fix"] is None


def test_the_index_gets_one_line_per_run_even_if_finalize_runs_twice(ws):
    write_digest(ws, outcome("r1"))
    write_digest(ws, outcome("r1"))  # finalize again after a crash
    write_digest(ws, outcome("r2", status="SUPERSEDED"))
    rows = read_index(ws)
    assert [(r["run_id"], r["status"]) for r in rows] == [("r1", "COMPLETED"), ("r2", "SUPERSEDED")]
    assert set(rows[0]) >= {"mp_id", "mp_sha256", "status", "finished_at", "run_id"}


def test_the_index_rotates_and_reads_across_the_rotation(ws, monkeypatch):
    monkeypatch.setattr(digest, "INDEX_MAX_BYTES", 600)
    for n in range(10):
        write_digest(ws, outcome(f"r{n}"))
    assert (ws.system_dir / "results.1.jsonl").exists()
    assert (ws.system_dir / "results.jsonl").stat().st_size <= 600
    runs = [r["run_id"] for r in read_index(ws)]
    assert runs == sorted(runs, key=lambda r: int(r[1:])) and runs[-1] == "r9" and len(runs) < 10
    (ws.system_dir / "results.jsonl").write_text((ws.system_dir / "results.jsonl").read_text() + "{cut")
    assert read_index(ws)[-1]["run_id"] == "r9"  # a torn last line is skipped
