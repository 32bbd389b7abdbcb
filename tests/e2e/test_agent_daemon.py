"""The agent executor in the real daemon: kill -9 and resume, SIGTERM checkpoint, waiting
out a provider's usage limit."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from mp_engine.core.workspace import Workspace
from tests.agentutil import GREET, ONE, calls, configure, level, only_run, progress, records
from tests.conftest import drop, events, read_state, result_field, wait_for
from tests.unit.agent.run.test_loop import alive

pytestmark = pytest.mark.daemon


def started(daemon_factory, ws: Workspace):
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] in ("ONLINE", "RUNNING"), what=lambda: "engine up\n" + d.output())
    return d


def test_sigkill_mid_iteration_then_restart_resumes_without_rerunning_a_finished_iteration(
    ws, daemon_factory, tmp_path
):
    log, gate = tmp_path / "calls.log", tmp_path / "go"
    configure(ws, [level("a", "second.py", "--log", str(log), "--gate", str(gate))])
    d = started(daemon_factory, ws)
    drop(ws, ONE)
    wait_for(lambda: len(calls(log)) == 2, what=lambda: "iteration 2 under way\n" + d.output())
    orphan = calls(log)[1]["pid"]
    d.kill9()
    assert alive(orphan)  # the agent outlived the engine (own session)
    d2 = started(daemon_factory, ws)
    wait_for(lambda: not alive(orphan), what="recovery to kill the stale agent group")
    gate.touch()
    wait_for(lambda: result_field(ws, "Status") == "COMPLETED", what=lambda: "COMPLETED\n" + d2.output())
    assert [c["iteration"] for c in calls(log)] == [1, 2, 2]  # iteration 1 ran once
    run = only_run(ws)
    ledger = run.ledger()
    assert ledger.step("MT-001_iter-001").attempts == 1 and ledger.step("MT-001_iter-002").attempts == 2
    (rec,) = [e for e in events(ws) if e.get("id") == "FR-EVT-WF-RECOVERY"]
    assert rec["steps_to_retry"] == ["MT-001_iter-002"] and rec["resume_point"] == "MT-001_iter-002"
    assert (rec["mp"], rec["mt"], rec["iteration"], rec["level"]) == ("MP-3.2", "MT-001", 2, 0)
    assert (run.dir / "agent/MT-001/iter-002/stdout.attempt1.txt").exists()
    assert [r["iteration"] for r in records(run)] == [1, 2] and result_field(ws, "Certificate") == "EXACT"
    d2.signal(signal.SIGTERM)
    d2.wait()


def test_sigterm_finishes_the_iteration_pauses_and_a_restart_resumes(ws, daemon_factory, tmp_path):
    log, gate = tmp_path / "calls.log", tmp_path / "go"
    configure(ws, [level("a", "second.py", "--log", str(log), "--gate", str(gate))])
    d = started(daemon_factory, ws)
    drop(ws, GREET)
    wait_for(lambda: len(calls(log)) == 2, what=lambda: "MT-001 iteration 2 under way\n" + d.output())
    d.signal(signal.SIGTERM)
    wait_for(lambda: events(ws, "stop_requested"), what="the stop to be seen")
    gate.touch()  # the iteration in flight finishes; no new one starts
    assert d.wait() == 0
    run = only_run(ws)
    assert [(r["mt"], r["iteration"], r["gate"]) for r in records(run)] == [("MT-001", 1, False), ("MT-001", 2, True)]
    assert progress(run)["status"] == "paused"
    assert [e["kind"] for e in events(ws) if e.get("id") == "FR-EVT-MT-007"] == ["stop"]
    assert read_state(ws)["run_id"] == run.run_id
    d2 = started(daemon_factory, ws)
    wait_for(lambda: result_field(ws, "Status") == "COMPLETED", what=lambda: "COMPLETED\n" + d2.output())
    assert [(c["mt"], c["iteration"]) for c in calls(log)] == [
        ("MT-001", 1),
        ("MT-001", 2),
        ("MT-002", 1),
        ("MT-002", 2),
    ]
    (resumed,) = [e for e in events(ws) if e.get("id") == "FR-EVT-MT-008"]
    assert (resumed["mt"], resumed["iteration"], resumed["after"]) == ("MT-002", 1, "stop")
    d2.signal(signal.SIGTERM)
    d2.wait()


def test_a_usage_limit_waits_with_resume_at_and_the_daemon_resumes_after_it(ws, daemon_factory, tmp_path):
    count = tmp_path / "count"
    configure(ws, [level("limited", "limited.py", "--kind", "usage", "--count", str(count), "--reset", "2")])
    d = started(daemon_factory, ws)
    drop(ws, ONE)
    waiting = wait_for(lambda: read_state(ws).get("waiting"), what=lambda: "waiting\n" + d.output())
    assert waiting["kind"] == "usage_limit" and waiting["resume_at"].endswith("Z")
    out = subprocess.run(
        [sys.executable, "-m", "mp_engine", "status", "--root", str(ws.root)], capture_output=True, text=True
    ).stdout
    if read_state(ws).get("waiting"):  # not resumed yet while status ran
        assert f"usage_limit until {waiting['resume_at']}" in out and "agent:" in out
    wait_for(lambda: result_field(ws, "Status") == "COMPLETED", timeout=30, what=lambda: "COMPLETED\n" + d.output())
    assert not events(ws, "mp_failed")
    assert [e["resume_at"] for e in events(ws, "mp_waiting")] == [waiting["resume_at"]]
    assert [e["after"] for e in events(ws) if e.get("id") == "FR-EVT-MT-008"] == ["usage_limit"]
    d.signal(signal.SIGTERM)
    d.wait()


def test_cancel_during_an_agent_call_stops_it_and_keeps_the_partial_work_on_its_branch(ws, daemon_factory, tmp_path):
    flag, pids = tmp_path / "hung", tmp_path / "pids"
    configure(ws, [level("a", "hang.py", "--flag", str(flag), "--pids", str(pids))])
    d = started(daemon_factory, ws)
    drop(ws, ONE)
    wait_for(lambda: pids.exists() and pids.read_text(), what=lambda: "the agent call under way\n" + d.output())
    agent_child = int(pids.read_text())
    out = subprocess.run(
        [sys.executable, "-m", "mp_engine", "cancel", "--root", str(ws.root)], capture_output=True, text=True
    )
    assert out.returncode == 0 and "cancelled MP-3.2" in out.stdout, out.stderr + d.output()
    assert not alive(agent_child)
    assert result_field(ws, "Status") == "CANCELLED"
    state = read_state(ws)
    assert state["status"] == "ONLINE" and state.get("halt") is None
    run = only_run(ws)
    assert progress(run)["status"] == "cancelled"
    assert not (ws.root / "SYSTEM/.engine/work" / run.run_id).exists()  # the worktree is gone, the branch stays
    branches = subprocess.run(["git", "branch", "--list", "mp/*"], cwd=ws.root, capture_output=True, text=True)
    assert "mp/MP-3.2" in branches.stdout
    d.signal(signal.SIGTERM)
    d.wait()


def test_status_of_an_agent_mp_names_its_micro_task_not_a_check_step(ws, daemon_factory, tmp_path):
    flag, pids = tmp_path / "hung", tmp_path / "pids"
    configure(ws, [level("a", "hang.py", "--flag", str(flag), "--pids", str(pids))])
    d = started(daemon_factory, ws)
    drop(ws, ONE)
    wait_for(lambda: pids.exists() and pids.read_text(), what=lambda: "the agent call under way\n" + d.output())
    status = subprocess.run(
        [sys.executable, "-m", "mp_engine", "status", "--root", str(ws.root)], capture_output=True, text=True
    )
    assert "running MP-3.2 MT-001 iteration 1 level 0" in status.stdout, status.stdout
    assert "check-001" not in status.stdout and "step 1/" not in status.stdout
    subprocess.run([sys.executable, "-m", "mp_engine", "cancel", "--root", str(ws.root)], capture_output=True)
    d.signal(signal.SIGTERM)
    d.wait()


def test_cancel_ends_a_wait_for_a_usage_limit_at_once(ws, daemon_factory, tmp_path):
    count = tmp_path / "count"
    configure(ws, [level("limited", "limited.py", "--kind", "usage", "--count", str(count), "--reset", "3600")])
    d = started(daemon_factory, ws)
    drop(ws, ONE)
    wait_for(lambda: read_state(ws).get("waiting"), what=lambda: "waiting\n" + d.output())
    out = subprocess.run(
        [sys.executable, "-m", "mp_engine", "cancel", "--root", str(ws.root)], capture_output=True, text=True
    )
    assert out.returncode == 0 and "cancelled MP-3.2" in out.stdout, out.stderr + d.output()
    state = read_state(ws)
    assert state["status"] == "ONLINE" and state.get("waiting") is None and state.get("run_id") is None
    assert int(count.read_text()) == 1  # the agent was not called again
    d.signal(signal.SIGTERM)
    d.wait()
