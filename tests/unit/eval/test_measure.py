"""What a run cost, read from its archive as the engine wrote it."""

from __future__ import annotations

import json

from mp_engine.eval.measure import call_seconds, check_seconds, measure


def archive(run, calls, checks):
    """A run archive with `calls` (durations) and `checks` ((start, end) seconds after 12:00:00)."""
    for i, seconds in enumerate(calls, 1):
        d = run / "agent" / "MT-001" / f"iter-{i:03d}"
        d.mkdir(parents=True)
        (d / "call.json").write_text(json.dumps({"call": {"duration": seconds}}))
    steps = [
        {"kind": "check", "started_at": f"2024-01-01T12:00:{a:06.3f}Z", "completed_at": f"2024-01-01T12:00:{b:06.3f}Z"}
        for a, b in checks
    ]
    steps.append(
        {"kind": "agent", "started_at": "2024-01-01T12:00:00.000Z", "completed_at": "2024-01-01T12:00:30.000Z"}
    )
    (run / "ledger.json").write_text(json.dumps({"steps": steps}))


def test_calls_are_summed_and_overlapping_checks_counted_once(tmp_path):
    archive(tmp_path, [1.5, 2.25], [(1.0, 3.0), (2.0, 4.0), (10.0, 10.5)])
    assert call_seconds(tmp_path) == 3.75
    assert check_seconds(tmp_path) == 3.5  # [1, 4] and [10, 10.5]
    assert check_seconds(tmp_path / "nowhere") == 0.0 and call_seconds(tmp_path / "nowhere") == 0.0


def test_the_result_s_figures_as_the_report_reads_them(tmp_path):
    archive(tmp_path, [1.0], [(1.0, 2.0)])
    result = {
        "run_id": "r1",
        "status": "COMPLETED",
        "duration": 4.2,
        "certificate": {"type": "EXACT", "reason": "all_checks_passed"},
        "micro_tasks": [
            {"iterations": 2, "level_names": ["cheap", "strong"]},
            {"iterations": 1, "level_names": ["cheap"]},
        ],
        "usage": {"input": 100, "output": 20, "cache_read": 5, "cost_usd": 0.5, "calls": 3, "priced": 3},
        "work": {"commit": "abc"},
    }
    m = measure(tmp_path, result)
    assert (m["certificate"], m["iterations"], m["micro_tasks"], m["levels"]) == ("EXACT", 3, 2, ["cheap", "strong"])
    assert m["tokens"] == {"input": 100, "output": 20, "cache_read": 5, "cache_write": 0} and m["cost_usd"] == 0.5
    assert (m["agent_seconds"], m["check_seconds"], m["mp_seconds"], m["work_commit"]) == (1.0, 1.0, 4.2, "abc")
    unpriced = measure(tmp_path, {**result, "usage": {"calls": 3, "priced": 0}})
    assert unpriced["cost_usd"] is None  # no CLI reported a price: unknown, not free
