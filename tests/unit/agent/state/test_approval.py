"""Plan approval (issue #42) through `Engine.tick()` with fake planner and worker CLIs:
`Plan: review` (or `[agent] plan_review`) stops the run after the planner plans, before
any task starts; `approve` starts the same run, other text is guidance the planner
re-plans with (within `max_replans`), `cancel` ends it without a halt."""

from __future__ import annotations

import json

import pytest

from mp_engine.commands.status import render_status
from mp_engine.config.load import load_config
from mp_engine.inbox import answer
from mp_engine.pipeline.engine import Engine
from mp_engine.views.status import status_report
from tests.agentutil import PLANNED, calls, configure, level, only_run, planner, progress, task
from tests.conftest import drop, events, read_state, result_field
from tests.gitutil import git

REVIEWED = PLANNED.replace("Plan: auto", "Plan: review")
A = task("a", ("hello", "out/a.txt"))
B = task("b", ("bye", "out/b.txt"), checks=["check-002"], after=["a"])


@pytest.fixture
def start(ws, monkeypatch, tmp_path):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    engines: list[Engine] = []

    def make(*plans, **opts) -> Engine:
        log = tmp_path / "calls.log"
        configure(
            ws, [level("good", "good.py", "--log", str(log))], planner=planner(tmp_path / "plans", *plans), **opts
        )
        eng = Engine(ws, load_config(ws.root))
        eng.start(daemon=False)
        engines.append(eng)
        return eng

    yield make
    for eng in engines:
        eng.shutdown()


def result_json(ws) -> dict:
    return json.loads((ws.system_dir / "RESULT_last.json").read_text())


def test_the_plan_waits_before_any_task_and_approve_starts_the_same_run(start, ws, tmp_path):
    engine = start({"tasks": [A, B]})
    drop(ws, REVIEWED)
    head = git(ws.root, "rev-parse", "HEAD").strip()
    assert engine.tick().action == "error"
    assert calls(tmp_path / "calls.log") == []  # no task started
    assert read_state(ws)["halt"]["mp_id"] == "MP-4.1"
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_plan_review"
    res = result_json(ws)
    asked = res["answerable"]
    assert asked["mt"] == "PLAN" and asked["kind"] == "plan_review"
    assert [(t["mt_id"], t["title"], t["after"], t["checks"]) for t in asked["plan"]] == [
        ("MT-001", "task a", [], ["check-001"]),
        ("MT-002", "task b", ["MT-001"], ["check-002"]),
    ]
    assert "MT-002: task b (after MT-001)" in asked["question"] and "Answer `approve`" in asked["question"]
    text = ws.result_file.read_text()
    assert "waits for approval before any task starts" in text and "mp-engine answer MP-4.1" in text
    assert git(ws.root, "rev-parse", "mp/MP-4.1").strip() == head  # nothing on the work branch
    # `status` shows the plan and how to answer it, read from the files.
    report = status_report(ws, load_config(ws.root))
    shown = render_status(report)
    assert "plan to approve: 2 micro-task(s)" in shown and "MT-002: task b (after MT-001)" in shown
    assert "`mp-engine answer MP-4.1 approve`" in shown
    halt = report["halt"]
    assert halt["question"]["kind"] == "plan_review" and [t["mt_id"] for t in halt["question"]["plan"]] == [
        "MT-001",
        "MT-002",
    ]
    run = only_run(ws)
    assert progress(run)["campaign"]["awaiting_approval"][0]["mt_id"] == "MT-001"

    answer.write_host(ws, "MP-4.1", "approve")
    assert engine.tick().action == "completed", ws.result_file.read_text()
    assert only_run(ws).run_id == run.run_id  # the same run, on the same branch
    assert [c["mt"] for c in calls(tmp_path / "calls.log")] == ["MT-001", "MT-002"]
    assert git(ws.root, "show", "mp/MP-4.1:out/b.txt") == "bye"
    assert result_json(ws)["certificate"]["type"] == "EXACT"
    (approved,) = progress(run)["campaign"]["approvals"]
    assert approved["verdict"] == "approved" and approved["source"] == "host"
    assert "Plan approval" in ws.result_file.read_text()
    assert [e["event"] for e in events(ws, "campaign_plan_approved")] == ["campaign_plan_approved"]


def test_guidance_re_plans_and_the_new_plan_waits_again(start, ws, tmp_path):
    engine = start({"tasks": [A, B]}, {"tasks": [{**A, "title": "task a, in French"}, B]})
    drop(ws, REVIEWED)
    assert engine.tick().action == "error"
    answer.write_host(ws, "MP-4.1", "Write the greeting in French first.")
    assert engine.tick().action == "error"  # the new plan, shown again
    assert calls(tmp_path / "calls.log") == []
    replan = (tmp_path / "plans" / "prompt-2.md").read_text()
    assert "re-plan 1" in replan and "Write the greeting in French first." in replan
    asked = result_json(ws)["answerable"]
    assert asked["question"].startswith("Re-plan 1 (2 micro-task(s)) waits for approval")
    assert [t["title"] for t in asked["plan"]] == ["task a, in French", "task b"]
    assert [t["mt_id"] for t in asked["plan"]] == ["MT-003", "MT-004"]  # the first plan's were replaced
    answer.write_host(ws, "MP-4.1", "Approve.")
    assert engine.tick().action == "completed", ws.result_file.read_text()
    assert [c["mt"] for c in calls(tmp_path / "calls.log")] == ["MT-003", "MT-004"]
    done = {t["mt_id"]: t["status"] for t in result_json(ws)["micro_tasks"]}
    assert done == {"MT-001": "skipped", "MT-002": "skipped", "MT-003": "completed", "MT-004": "completed"}
    verdicts = [a["verdict"] for a in progress(only_run(ws))["campaign"]["approvals"]]
    assert verdicts == ["re-plan", "approved"]


def test_with_no_re_plan_left_guidance_keeps_the_plan_waiting(start, ws, tmp_path):
    engine = start({"tasks": [A, B]}, max_replans=0)
    drop(ws, REVIEWED)
    assert engine.tick().action == "error"
    answer.write_host(ws, "MP-4.1", "Something else, please.")
    assert engine.tick().action == "error"
    asked = result_json(ws)["answerable"]
    assert "no re-plan is left" in asked["question"] and "could not be taken" in asked["question"]
    assert json.loads((tmp_path / "plans" / ".calls").read_text()) == 1  # the planner was not asked again
    assert calls(tmp_path / "calls.log") == []


def test_cancel_ends_the_mp_cancelled_without_a_halt(start, ws, tmp_path):
    engine = start({"tasks": [A, B]})
    drop(ws, REVIEWED)
    assert engine.tick().action == "error"
    answer.write_host(ws, "MP-4.1", "cancel")
    assert engine.tick().action == "cancelled"
    assert result_field(ws, "Status") == "CANCELLED" and read_state(ws)["halt"] is None
    assert calls(tmp_path / "calls.log") == []
    assert {t["status"] for t in result_json(ws)["micro_tasks"]} == {"skipped"}
    assert events(ws, "mp_cancelled")[-1]["source"] == "answer"


def test_the_setting_holds_every_planned_mp_with_tasks_at_once(start, ws, tmp_path):
    engine = start({"tasks": [A, {**B, "depends_on": []}]}, plan_review=True, max_parallel=2)
    drop(ws, PLANNED)
    assert engine.tick().action == "error"
    assert result_field(ws, "Error-Kind") == "agent_plan_review" and calls(tmp_path / "calls.log") == []
    answer.write_host(ws, "MP-4.1", "approve")
    assert engine.tick().action == "completed", ws.result_file.read_text()
    assert sorted(c["mt"] for c in calls(tmp_path / "calls.log")) == ["MT-001", "MT-002"]
