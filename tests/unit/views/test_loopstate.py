"""Loopr's state names and `next_reset_at` in `status --json` (views/loopstate.py): the
table over the state file and the last result. Real runs through `Engine.tick()` show
them too (tests/unit/agent/run/test_loop.py: a wait for the hourly limit, an open breaker)."""

from __future__ import annotations

from mp_engine.record.stateview import StateView
from mp_engine.views.loopstate import loop_state

RESET = "2026-11-23T15:00:00Z"


def state(**fields) -> StateView:
    return StateView({"status": "ONLINE", "current": "IDLE", "last_updated": "2026-11-23T14:00:00Z", **fields})


def ended(status: str, cert: str | None = None, reason: str = "") -> dict:
    return {"status": status, "certificate": {"type": cert, "reason": reason} if cert else None}


def test_a_claimed_mp_is_running_or_waiting_and_a_reset_is_when_its_limit_resets():
    running = state(status="RUNNING", current="MP-1.1", run_id="r1")
    assert loop_state(running, None) == {"state": "running", "next_reset_at": None}
    for kind in ("rate_limit", "usage_limit", "forge_rate_limit"):
        waits = state(status="RUNNING", current="MP-1.1", run_id="r1", waiting={"kind": kind, "resume_at": RESET})
        assert loop_state(waits, ended("COMPLETED")) == {"state": "waiting", "next_reset_at": RESET}
    repo = state(status="OFFLINE", run_id="r1", waiting={"kind": "repository", "resume_at": RESET})
    assert loop_state(repo, None) == {"state": "waiting", "next_reset_at": None}  # no limit to reset


def test_with_nothing_running_the_last_result_says_how_the_loop_ended():
    idle = state()
    assert loop_state(idle, None) == {"state": None, "next_reset_at": None}  # no MP yet
    assert loop_state(idle, ended("COMPLETED", "EXACT", "all_checks_passed"))["state"] == "complete"
    for reason in ("breaker:no_progress", "residual_grew"):
        assert loop_state(idle, ended("ERROR", "DIVERGED", reason))["state"] == "circuit_open"
    assert loop_state(idle, ended("ERROR", "DIVERGED", "drift"))["state"] == "error"
    for cert in ("BLOCKED", "NEED_INFO"):
        assert loop_state(idle, ended("ERROR", cert, "hard_gate"))["state"] == "blocked"
    for status in ("ERROR", "REFUSED"):
        assert loop_state(idle, ended(status))["state"] == "error"
    assert loop_state(idle, ended("CANCELLED"))["state"] is None  # Loopr has no name for it
    recorded_only = state(last_result={"status": "COMPLETED", "run_id": "gone"})
    assert loop_state(recorded_only, None)["state"] == "complete"  # the archive was pruned
