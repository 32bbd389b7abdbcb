"""Plan approval (issue #42) in the real daemon: `kill -9` at every point of the pause (the
planner's call, the halt that waits for approval, the first task after `approve`) keeps
the pending approval and what a person answered; the same run goes on to EXACT."""

from __future__ import annotations

import json
import signal

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.inbox import answer
from mp_engine.views.status import status_report
from tests.agentutil import PLANNED, calls, configure, level, only_run, progress, task
from tests.conftest import drop, read_state, result_field, wait_for
from tests.unit.agent.run.test_loop import alive

pytestmark = pytest.mark.daemon

A = task("a", ("hello", "out/a.txt"))
B = task("b", ("bye", "out/b.txt"), checks=["check-002"], after=["a"])


def started(daemon_factory, ws: Workspace):
    d = daemon_factory(ws.root).start()
    wait_for(
        lambda: read_state(ws)["status"] in ("ONLINE", "RUNNING", "ERROR"), what=lambda: "engine up\n" + d.output()
    )
    return d


def waits_for_approval(ws: Workspace) -> bool:
    res = json.loads((ws.system_dir / "RESULT_last.json").read_text()) if ws.result_file.exists() else {}
    return (res.get("answerable") or {}).get("kind") == "plan_review" and bool(read_state(ws).get("halt"))


def test_kill9_at_every_point_keeps_the_pending_plan_approval(ws, daemon_factory, tmp_path):
    plans, log = tmp_path / "plans", tmp_path / "calls.log"
    plan_go, work_go = tmp_path / "plan-go", tmp_path / "work-go"
    plans.mkdir()
    (plans / "1.json").write_text(json.dumps({"tasks": [A, B]}))
    worker = level("good", "good.py", "--log", str(log), "--wait-for", str(work_go))
    planning_now = tmp_path / "planning"  # the planner touches it, then waits for plan_go
    planning = level(
        "planner", "planner.py", "--answers", str(plans), "--touch", str(planning_now), "--wait-for", str(plan_go)
    )
    configure(ws, [worker], planner=planning)

    # 1. During the planner's call: it runs again after the restart, and the plan waits.
    d = started(daemon_factory, ws)
    drop(ws, PLANNED.replace("Plan: auto", "Plan: review"))
    wait_for(planning_now.exists, what=lambda: "the planner called\n" + d.output())
    d.kill9()
    plan_go.touch()
    d = started(daemon_factory, ws)
    wait_for(lambda: waits_for_approval(ws), what=lambda: "the plan waits\n" + d.output())
    run = only_run(ws)
    assert result_field(ws, "Error-Kind") == "agent_plan_review" and calls(log) == []

    # 2. While the plan waits: the halt, the question and the plan outlive the engine.
    d.kill9()
    d = started(daemon_factory, ws)
    assert waits_for_approval(ws) and read_state(ws)["halt"]["mp_id"] == "MP-4.1"
    halt = status_report(ws, load_config(ws.root))["halt"]
    assert [t["mt_id"] for t in halt["question"]["plan"]] == ["MT-001", "MT-002"]
    assert calls(log) == []

    # 3. After `approve`, during the first task: the approval is kept, nothing is re-planned.
    answer.write_host(ws, "MP-4.1", "approve")
    wait_for(lambda: len(calls(log)) == 1, what=lambda: "MT-001 under way\n" + d.output())
    orphan = calls(log)[0]["pid"]
    d.kill9()
    d = started(daemon_factory, ws)
    wait_for(lambda: not alive(orphan), what="recovery to kill the stale agent group")
    work_go.touch()
    wait_for(lambda: result_field(ws, "Status") == "COMPLETED", what=lambda: "COMPLETED\n" + d.output())
    assert result_field(ws, "Certificate") == "EXACT" and only_run(ws).run_id == run.run_id
    assert [c["mt"] for c in calls(log)] == ["MT-001", "MT-001", "MT-002"]  # MT-001 again after the kill
    assert json.loads((plans / ".calls").read_text()) == 2  # the killed call, then one plan: no re-plan
    assert [a["verdict"] for a in progress(run)["campaign"]["approvals"]] == ["approved"]
    assert [s.step_id for s in run.ledger().model.steps if s.kind == "answer"] == ["ANSWER-1"]
    d.signal(signal.SIGTERM)
    d.wait()
