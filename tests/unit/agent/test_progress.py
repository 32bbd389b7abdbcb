"""The ProgressArtifact: a nonce per run, pauses that resume, and what status shows."""

from __future__ import annotations

import json

from mp_engine.agent.progress import Progress, load_report, pull_request_line, render_lines


def made(tmp_path) -> Progress:
    return Progress.create(
        tmp_path, mp_id="MP-2.1", run_id="r1", policy={}, tasks=[{"id": "MT-001"}], base={"head": None}
    )


def test_a_new_run_gets_its_own_nonce_and_loads_back(tmp_path):
    p = made(tmp_path)
    other = Progress.create(tmp_path / "other", mp_id="MP-2.1", run_id="r2", policy={}, tasks=[], base={})
    assert len(p.nonce) == 24 and p.nonce != other.nonce
    assert Progress.load(tmp_path).data == p.data and p.status == "in_progress"
    assert Progress.load(tmp_path / "absent") is None


def test_a_wait_is_persisted_and_resuming_ends_it(tmp_path):
    p = made(tmp_path)
    p.pause("usage_limit", "session limit", "2026-11-24T20:10:00Z")
    on_disk = json.loads((tmp_path / "agent" / "progress.json").read_text())
    assert on_disk["status"] == "waiting" and on_disk["waiting"]["resume_at"] == "2026-11-24T20:10:00Z"
    ended = Progress.load(tmp_path).resumed()
    assert ended["kind"] == "usage_limit"
    p2 = Progress.load(tmp_path)
    assert p2.resumed()["kind"] == "usage_limit"  # not saved yet: resuming again finds the same pause
    p.resumed()
    assert p.resumed() is None  # already in progress


def test_a_polled_wait_is_one_pause_however_many_looks_and_ends_once(tmp_path):
    p = made(tmp_path)
    assert p.pause("ci", "waiting for CI", "2026-11-24T20:10:00Z", polled=True) is True  # it begins
    p.resumed()
    assert p.pause("ci", "1 check pending", "2026-11-24T20:10:30Z", polled=True) is False  # the same, looked at again
    (only,) = p.data["pauses"]
    assert only["reason"] == "1 check pending" and only["resume_at"] == "2026-11-24T20:10:30Z" and only["polled"]
    assert p.data["waiting"]["resume_at"] == "2026-11-24T20:10:30Z" and p.polling() is only
    p.resumed()
    assert p.end_poll() is only and only["ended_at"] and p.polling() is None and p.end_poll() is None
    assert p.pause("ci", "waiting for CI", "2026-11-24T20:20:00Z", polled=True) is True  # the next round's: new
    assert p.pause("stop", "SIGTERM") is True and p.polling() is None  # a stop is a pause of its own
    assert [x["kind"] for x in p.data["pauses"]] == ["ci", "ci", "stop"]


def test_a_stop_pause_has_no_wait(tmp_path):
    p = made(tmp_path)
    p.pause("stop", "SIGTERM")
    assert p.status == "paused" and p.data["waiting"] is None and p.data["pauses"][-1]["kind"] == "stop"


def test_status_lines_of_a_live_run(tmp_path):
    p = made(tmp_path)
    p.data["current_state"] = {
        "active_mt": "MT-001",
        "mt_number": 1,
        "micro_tasks": 1,
        "iteration": 2,
        "level": 0,
        "level_name": "small",
        "residual": 1,
        "iterations_left": 8,
        "budget_seconds_left": 100.0,
        "calls_last_hour": 3,
        "calls_per_hour": 100,
    }
    p.save()
    report = load_report(tmp_path)
    lines = render_lines(report, {"kind": "rate_limit", "resume_at": "later", "reason": "100 calls"})
    assert "MT-001 (1 of 1), iteration 2, level 0 (small), residual 1  [in_progress]" in lines[0]
    assert "8 iterations and 100.0 s left; 3/100 agent calls" in lines[1]
    assert lines[2].strip() == "waiting:         rate_limit until later (100 calls)"
    assert load_report(tmp_path / "not-an-agent-run") is None


def test_status_shows_the_agents_last_summary_and_the_circuit(tmp_path):
    p = made(tmp_path)
    p.data["current_state"] = {
        "active_mt": "MT-002",
        "mt_number": 2,
        "micro_tasks": 3,
        "iteration": 1,
        "level": 1,
        "level_name": "big",
        "residual": 2,
        "last_summary": "added the parser; tests still fail on empty input",
        "circuit": "closed",
        "last_trip": {"mt": "MT-002", "level": 0, "reason": "breaker:no_progress", "escalated": True},
    }
    p.save()
    lines = render_lines(load_report(tmp_path), None)
    assert "agent summary:   added the parser; tests still fail on empty input" in lines[2]
    assert (
        lines[3].strip() == "agent circuit:   closed; last trip: breaker:no_progress on MT-002 at level 0 (escalated)"
    )


PR = {
    "repo": "app",
    "number": 7,
    "url": "https://github.com/me/app/pull/7",
    "head": "mp/MP-2.1",
    "base": "main",
    "ci_rounds": [{"sha": "a" * 40, "state": "failed", "checks": {"tests": "failure"}}],
    "review_rounds": 1,
    "ended": None,
    "ci_rounds_max": 2,
    "review_rounds_max": 3,
}


def test_status_shows_the_pull_request_ci_s_word_and_each_round_against_its_bound(tmp_path):
    p = made(tmp_path)
    p.data["pull_request"] = {**PR, "ci_now": "waiting for CI (1 check pending)"}
    p.save()
    report = load_report(tmp_path)
    assert report["pull_request"]["number"] == 7
    (line,) = [ln for ln in render_lines(report, None) if "pull request:" in ln]
    assert line.strip() == (
        "pull request:    #7 https://github.com/me/app/pull/7; CI: waiting for CI (1 check pending); "
        "CI rounds 1 of 2, review rounds 1 of 3"
    )
    # Without CI's word now, the last round's; before the first push, the branch it will come from.
    assert "CI: failed;" in pull_request_line({**PR, "ci_now": ""})
    assert pull_request_line({"head": "mp/MP-2.1", "ended": "branch_moved"}) == (
        "not opened yet (mp/MP-2.1); CI: not judged yet; CI rounds 0, review rounds 0; ended: branch_moved"
    )
