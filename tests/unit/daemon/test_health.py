"""What the daemon says about itself: the one status line, how long ago, the last sync."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mp_engine.daemon.health import ago, current_step, progress_of, read_last_sync_ok, record_sync_ok, status_line
from mp_engine.record.archive import create_run
from mp_engine.record.state import Halt, SessionState, Status

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def iso(delta: timedelta) -> str:
    return (NOW - delta).isoformat().replace("+00:00", "Z")


def test_ago_is_coarse_and_never_raises():
    assert ago(None) == "never"
    assert ago(iso(timedelta(seconds=5)), NOW) == "just now"
    assert ago(iso(timedelta(minutes=3, seconds=59)), NOW) == "3 min ago"
    assert ago(iso(timedelta(hours=2)), NOW) == "2 h ago"
    assert ago(iso(timedelta(days=5)), NOW) == "5 d ago"
    assert ago("not a time", NOW) == "not a time"


def test_the_status_line_says_halted_idle_waiting_or_running(ws):
    state = SessionState(status=Status.ONLINE)
    assert status_line(ws, state, NOW) == "idle, no MP run yet"
    state.last_result = {
        "mp_id": "MP-1.4",
        "status": "COMPLETED",
        "run_id": "r",
        "finished_at": iso(timedelta(minutes=3)),
    }
    assert status_line(ws, state, NOW) == "idle, last MP-1.4 COMPLETED 3 min ago"
    state.halt = Halt(mp_id="MP-1.5", run_id="r", reason="exit 1 in step 2", since=iso(timedelta(0)))
    assert status_line(ws, state, NOW) == "halted: MP-1.5 ERROR awaiting approval (exit 1 in step 2)"
    state.halt = None
    state.run_id, state.current = "r", "MP-1.6"
    state.waiting = {"kind": "usage_limit", "resume_at": "2026-11-24T20:10:00Z"}
    assert status_line(ws, state, NOW) == "waiting MP-1.6: usage_limit until 2026-11-24T20:10:00Z"


def test_the_status_line_of_a_shell_run_names_its_step(ws):
    data = b"# MP-1.7\n```bash\ntrue\n```\n```bash\ntrue\n```\n## Validate\n```bash\ntrue\n```\n"
    run, ledger = create_run(ws, mp_id="MP-1.7", data=data, mp_sha256="s", executor="shell")
    ledger.start(ledger.ensure_step("step-001", "command", "k1"))
    ledger.finish(ledger.step("step-001"), ok=True, output_ref=None)
    ledger.save()
    ledger.start(ledger.ensure_step("step-002", "command", "k2"))
    step = current_step(ws, run.run_id)
    assert {k: step[k] for k in ("id", "number", "of")} == {"id": "step-002", "number": 2, "of": 3}
    assert step["started_at"] and step["run_started_at"] and "step_timeout" not in step
    state = SessionState(status=Status.RUNNING, current="MP-1.7", run_id=run.run_id)
    # A check is no step (issue #44: "step 2/3" for two steps and a check).
    assert status_line(ws, state, NOW) == "running MP-1.7 step 2/2" and step["label"] == "step 2/2"
    assert current_step(ws, "no-such-run") is None
    # What the heartbeat carries for an orchestrator (mp-engine mcp's wait_result).
    assert progress_of(ws, run.run_id)["step"] == {
        "id": "step-002",
        "number": 2,
        "of": 3,
        "started_at": step["started_at"],
    }
    assert progress_of(ws, "no-such-run") is None
    ledger.finish(ledger.step("step-002"), ok=True, output_ref=None)
    ledger.start(ledger.ensure_step("check-001", "check", "k3"))
    assert current_step(ws, run.run_id)["label"] == "check 1/1"
    assert status_line(ws, state, NOW) == "running MP-1.7 check 1/1"


def test_the_last_good_sync_is_recorded(ws):
    assert read_last_sync_ok(ws.local_dir) is None
    record_sync_ok(ws.local_dir)
    assert read_last_sync_ok(ws.local_dir).endswith("Z")


def test_the_heartbeat_carries_an_agent_run_s_pull_request_small(ws):
    from mp_engine.agent.progress import Progress

    run_dir = ws.runs_dir / "r-pr"
    p = Progress.create(run_dir, mp_id="MP-41.2", run_id="r-pr", policy={}, tasks=[], base={})
    assert "pull_request" not in progress_of(ws, "r-pr")  # no pull request yet: nothing said of one
    p.data["pull_request"] = {
        "number": 3,
        "url": "https://github.com/me/app/pull/3",
        "head": "mp/MP-41.2",
        "head_sha": "b" * 40,
        "ci_now": "waiting for CI",
        "ci_rounds": [{"sha": "a" * 40, "state": "failed", "checks": {"tests": "failure", "lint": "success"}}],
        "review_rounds": 0,
        "ended": None,
        "waiting": {"kind": "ci", "reason": "waiting for CI on https://github.com/me/app/pull/3"},
    }
    p.save()
    beat = progress_of(ws, "r-pr")["pull_request"]
    assert beat["number"] == 3 and beat["ci_rounds"] == ["failed"] and beat["waiting"] == "ci"
    assert beat["ci_now"] == "waiting for CI" and "checks" not in str(beat)
    # Tasks running at once (a CI fix round in parallel): the pull request is said all the same.
    p.data["running"] = [{"mt": "MT-002", "iteration": 1, "level_name": "fast", "elapsed": 2.0, "last_line": ""}]
    p.save()
    doing = progress_of(ws, "r-pr")
    assert doing["micro_tasks"][0]["mt"] == "MT-002" and doing["pull_request"]["number"] == 3
