"""Plans, re-plans and drift checks (issue #17) through `Engine.tick()`, with fake planner,
reflector and worker CLIs (tests/fake_agents/)."""

from __future__ import annotations

import json

import pytest

from mp_engine.agent.progress import load_report, render_lines
from mp_engine.alerts.rules import Rules
from mp_engine.config.load import load_config
from mp_engine.config.notify import ALERT_KINDS
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.engine import Engine
from tests.agentutil import (
    GATE,
    GREET,
    add_route,
    calls,
    configure,
    level,
    only_run,
    planner,
    progress,
    task,
)
from tests.agentutil import (
    PLANNED as TWO,
)
from tests.conftest import drop, events, read_state, result_field, wait_for
from tests.gitutil import git

PLANNED = TWO + "\n```bash\ngrep -qx ciao out/c.txt\n```\n"  # three checks

A = task("a", ("hello", "out/a.txt"))
B = task("b", ("bye", "out/b.txt"), checks=["check-002"])
C = task("c", ("ciao", "out/c.txt"), checks=["check-003"])


@pytest.fixture
def start(ws: Workspace, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    engines: list[Engine] = []

    def make(levels=None, **opts) -> Engine:
        configure(ws, levels or [level("good", "good.py")], **opts)
        eng = Engine(ws, load_config(ws.root))
        eng.start(daemon=False)
        engines.append(eng)
        return eng

    yield make
    for eng in engines:
        eng.shutdown()


def run_mp(engine: Engine, ws: Workspace, text: str):
    drop(ws, text)
    return engine.tick()


def result_json(ws: Workspace) -> dict:
    return json.loads((ws.system_dir / "RESULT_last.json").read_text())


def names(ws: Workspace, event: str, field: str = "event") -> list:
    return [e.get(field) for e in events(ws, event)]


def test_a_plan_with_dependencies_runs_in_their_order_one_commit_per_task(start, ws, tmp_path):
    """The planner lists b before a, and b depends on a: a runs first. Each task is one commit
    on mp/MP-4.1 with a trailer pointing at its evidence; the result and status show the plan."""
    answers, log = tmp_path / "plans", tmp_path / "calls.log"
    plan = {"tasks": [{**B, "depends_on": ["a"], "domain": None}, A, C], "notes": "extra keys are fine"}
    engine = start([level("good", "good.py", "--log", str(log))], planner=planner(answers, plan))
    res = run_mp(engine, ws, PLANNED)
    assert res.action == "completed", ws.result_file.read_text()
    assert [c["mt"] for c in calls(log)] == ["MT-001", "MT-002", "MT-003"]
    done = result_json(ws)["micro_tasks"]
    assert [(t["mt_id"], t["status"]) for t in done] == [("MT-001", "completed")] * 1 + [
        ("MT-002", "completed"),
        ("MT-003", "completed"),
    ]
    run = only_run(ws)
    summary = progress(run)["plan"]
    assert [(t["id"], t["ref"], t["after"]) for t in summary] == [
        ("MT-001", "a", []),
        ("MT-002", "b", ["MT-001"]),
        ("MT-003", "c", []),
    ]
    # One commit per task, in run order, fast-forwarded onto the channel branch.
    subjects = git(ws.root, "log", "--format=%s", "-3").strip().splitlines()
    trailers = git(ws.root, "log", "--format=%(trailers:key=Evidence,valueonly)", "-3").split()
    assert subjects == [
        "MP-4.1 MT-003: task c",
        "MP-4.1 MT-002: task b",
        "MP-4.1 MT-001: task a",
    ]
    assert trailers == [f"{ws.rel(run.dir)}/agent/MT-00{n}/iter-001" for n in (3, 2, 1)]
    commits = {t["mt_id"]: t["commit"] for t in done}
    assert commits["MT-001"] == git(ws.root, "rev-parse", "HEAD~2").strip()
    # The planner saw the goal, every check and the repository map; it answered once.
    prompt = (answers / "prompt-1.md").read_text()
    assert "Create the greeting files" in prompt and "check-003:" in prompt and "## Repository map" in prompt
    assert json.loads((answers / ".calls").read_text()) == 1
    # Drift checks: after 1 of 3 tasks (25 %: the checks of MT-001), 2 of 3 (50 %), and all
    # of the MP's checks at the end.
    checks = result_json(ws)["drift_checks"]
    assert [(d["at"], d["drift"], d["checks"]) for d in checks] == [
        (25, False, ["check-001"]),
        (50, False, ["check-001", "check-002"]),
        (100, False, ["check-001", "check-002", "check-003"]),
    ]
    text = ws.result_file.read_text()
    assert "## Plan" in text and "MT-002 (b): after MT-001" in text and "Drift check at 100 %: no drift" in text
    lines = render_lines(load_report(run.dir), None)
    plan_line = next(ln for ln in lines if ln.strip().startswith("plan:"))
    assert f"MT-001 done ({commits['MT-001'][:12]})" in plan_line and "3 drift check(s)" in plan_line


def test_an_invalid_plan_is_sent_back_once_with_what_was_wrong(start, ws, tmp_path):
    answers = tmp_path / "plans"
    cycle = {"tasks": [{**A, "depends_on": ["b"]}, {**B, "depends_on": ["a"]}]}
    engine = start(planner=planner(answers, cycle, {"tasks": [A, B, C]}))
    assert run_mp(engine, ws, PLANNED).action == "completed", ws.result_file.read_text()
    again = (answers / "prompt-2.md").read_text()
    assert "## Your previous answer was refused" in again and "the dependencies form a cycle among a, b" in again
    assert names(ws, "campaign_plan_invalid", "error") == ["the dependencies form a cycle among a, b"]


def test_a_second_invalid_plan_ends_blocked_with_the_error_and_touches_nothing(start, ws, tmp_path):
    answers = tmp_path / "plans"
    head = None
    engine = start(planner=planner(answers, "here is my plan: do it all", {"tasks": [{**A, "checks": ["check-009"]}]}))
    head = git(ws.root, "rev-parse", "HEAD").strip()
    assert run_mp(engine, ws, PLANNED).action == "error"
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_invalid_plan"
    text = ws.result_file.read_text()
    assert "task 'a' names check(s) 'check-009'; the MP's checks are check-001, check-002, check-003" in text
    assert "`[agent.planner]`" in text  # the fix
    assert "the plan is not JSON" in (answers / "prompt-2.md").read_text()
    assert not (ws.root / "out").exists()
    assert git(ws.root, "log", "-1", "--format=%H", head).strip() == head


def test_plan_auto_without_a_planner_needs_info(start, ws):
    engine = start()
    assert run_mp(engine, ws, PLANNED).action == "error"
    assert result_field(ws, "Certificate") == "NEED_INFO"
    assert "Add an `[agent.planner]` level" in ws.result_file.read_text()


def test_a_task_that_exhausts_its_chain_is_re_planned_with_the_failure(start, ws, tmp_path):
    answers = tmp_path / "plans"
    wrong = task("a", ("helo", "out/a.txt"))
    engine = start(
        [level("good", "good.py"), GATE],
        fail_threshold=1,
        planner=planner(answers, {"tasks": [wrong, B, C]}, {"tasks": [task("a2", ("hello", "out/a.txt")), B, C]}),
    )
    assert run_mp(engine, ws, PLANNED).action == "completed", ws.result_file.read_text()
    tasks = result_json(ws)["micro_tasks"]
    assert [(t["mt_id"], t["status"], t["replaced"]) for t in tasks] == [
        ("MT-001", "failed", True),
        ("MT-002", "skipped", True),
        ("MT-003", "skipped", True),
        ("MT-004", "completed", False),
        ("MT-005", "completed", False),
        ("MT-006", "completed", False),
    ]
    assert "re-planned" in tasks[0]["note"] and tasks[1]["note"] == "replaced by re-plan 1"
    (replan,) = result_json(ws)["replans"]
    assert replan["cause"] == "failed" and replan["mt"] == "MT-001" and replan["reason"] == "hard_gate"
    assert replan["tasks"] == ["MT-004", "MT-005", "MT-006"]
    again = (answers / "prompt-2.md").read_text()
    assert "(re-plan 1)" in again and "## Why the last plan must change" in again
    assert "check-001 failed" in again and "out/a.txt" in again  # the failed check and the diff so far
    assert "Re-plan 1 (failed on MT-001)" in ws.result_file.read_text()


def test_without_re_plans_left_a_failed_task_skips_what_needs_it_and_the_channel_stays_untouched(start, ws, tmp_path):
    answers = tmp_path / "plans"
    plan = {"tasks": [task("a", ("helo", "out/a.txt")), {**B, "depends_on": ["a"]}, C]}
    engine = start([level("good", "good.py"), GATE], fail_threshold=1, max_replans=0, planner=planner(answers, plan))
    head = git(ws.root, "rev-parse", "HEAD").strip()
    assert run_mp(engine, ws, PLANNED).action == "error"
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_hard_gate"
    tasks = result_json(ws)["micro_tasks"]
    assert [(t["mt_id"], t["status"]) for t in tasks] == [
        ("MT-001", "blocked"),
        ("MT-002", "skipped"),
        ("MT-003", "completed"),
    ]
    assert tasks[1]["note"] == "it needs MT-001, which did not pass"
    # The channel branch's code is untouched; the work branch holds MT-003's commit.
    assert not (ws.root / "out/c.txt").exists()
    assert git(ws.root, "log", "--format=%s", "-1", "mp/MP-4.1").strip() == "MP-4.1 MT-003: task c"
    assert "branch `mp/MP-4.1`" in ws.result_file.read_text()
    assert head in git(ws.root, "log", "--format=%H", "-5")


def test_drift_found_by_a_regressed_check_leads_to_a_re_plan(start, ws, tmp_path):
    """b passes its own check but breaks a's: the final drift check finds check-001 regressed
    and the planner plans the repair."""
    answers = tmp_path / "plans"
    breaker = task("b", ("oops", "out/a.txt"), ("bye", "out/b.txt"), checks=["check-002"])
    repair = task("fix", ("hello", "out/a.txt"), after=["a"])
    engine = start(planner=planner(answers, {"tasks": [A, breaker]}, {"tasks": [repair]}))
    assert run_mp(engine, ws, TWO).action == "completed", ws.result_file.read_text()
    checks = result_json(ws)["drift_checks"]
    assert [(d["at"], d["regressed"], d["drift"]) for d in checks] == [
        (50, [], False),
        (100, ["check-001"], True),
        (100, [], False),
    ]
    assert result_json(ws)["replans"][0]["cause"] == "drift"
    again = (answers / "prompt-2.md").read_text()
    assert "Drift at 100 %: check-001 regressed" in again and "- MT-001 (a): task a" in again
    assert (ws.root / "out/a.txt").read_text() == "hello\n" and result_field(ws, "Certificate") == "EXACT"


def test_drift_with_no_re_plan_left_is_diverged(start, ws, tmp_path):
    breaker = task("b", ("oops", "out/a.txt"), ("bye", "out/b.txt"), checks=["check-002"])
    engine = start(max_replans=0, planner=planner(tmp_path / "plans", {"tasks": [A, breaker]}))
    assert run_mp(engine, ws, TWO).action == "error"
    assert result_field(ws, "Certificate") == "DIVERGED" and result_field(ws, "Error-Kind") == "agent_drift"
    assert "Drift at 100 %: check-001 regressed" in ws.result_file.read_text()
    assert not (ws.root / "out").exists()  # not EXACT: nothing lands


def test_the_reflector_s_drifted_verdict_re_plans_and_aligned_goes_on(start, ws, tmp_path):
    answers, seen = tmp_path / "plans", tmp_path / "reflections"
    reflector = level("critic", "reflector.py", "--verdicts", "drifted,aligned", "--save", str(seen))
    engine = start(planner=planner(answers, {"tasks": [A, B]}, {"tasks": [B]}), reflector=reflector)
    assert run_mp(engine, ws, TWO).action == "completed", ws.result_file.read_text()
    checks = result_json(ws)["drift_checks"]
    assert [(d["at"], d["reflector"], d["drift"]) for d in checks] == [(50, "drifted", True), (100, None, False)]
    assert checks[0]["why"] == "the reflector's reason 1"
    asked = (seen / "reflect-1.md").read_text()
    assert "Create the greeting files" in asked and "- MT-001: task a" in asked
    assert "the reflector says the work drifted: the reflector's reason 1" in (answers / "prompt-2.md").read_text()
    assert [t["status"] for t in result_json(ws)["micro_tasks"]] == ["completed", "skipped", "completed"]
    rules = Rules(str(ws.root), ALERT_KINDS)  # issue #44: drift is an alert for a person, once
    alerts = [a for e in events(ws, "campaign_drift_check") if (a := rules.alert(e)) is not None]
    assert [(a.kind, a.mp) for a in alerts] == [("drift", "MP-4.1")] and "reason 1" in alerts[0].body


def test_a_listed_mp_with_a_reflector_that_finds_drift_ends_diverged(start, ws, tmp_path):
    reflector = level("critic", "reflector.py", "--verdicts", "drifted", "--save", str(tmp_path / "r"))
    engine = start(reflector=reflector)
    assert run_mp(engine, ws, GREET).action == "error"
    assert result_field(ws, "Certificate") == "DIVERGED" and result_field(ws, "Error-Kind") == "agent_drift"
    (check,) = result_json(ws)["drift_checks"]
    assert check["at"] == 50 and check["checks"] == []  # each listed task is held to the earlier checks already
    assert [t["status"] for t in result_json(ws)["micro_tasks"]] == ["completed", "pending"]


def test_a_planned_task_s_domain_routes_it_and_land_branch_leaves_the_work_for_review(start, ws, tmp_path):
    answers, docs_log, default_log = tmp_path / "plans", tmp_path / "docs.log", tmp_path / "default.log"
    plan = {"tasks": [A, {**B, "domain": "Docs"}, C]}
    configure(ws, [level("big", "good.py", "--log", str(default_log))], land="branch", planner=planner(answers, plan))
    add_route(ws, "docs", level("small", "good.py", "--log", str(docs_log)))
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    try:
        assert run_mp(engine, ws, PLANNED).action == "completed", ws.result_file.read_text()
    finally:
        engine.shutdown()
    assert [c["mt"] for c in calls(docs_log)] == ["MT-002"]
    assert [c["mt"] for c in calls(default_log)] == ["MT-001", "MT-003"]
    assert not (ws.root / "out").exists()  # land = branch: the channel branch has only the result
    assert result_json(ws)["work"]["branch"] == "mp/MP-4.1"
    assert git(ws.root, "show", "mp/MP-4.1:out/b.txt").strip() == "bye"


def test_a_level_without_tools_sees_the_planned_task_s_files(start, ws, tmp_path):
    (ws.root / "conf").mkdir()
    (ws.root / "conf/secret.py").write_text("SECRET_NUMBER = 41\n")
    plan = {
        "tasks": [
            {
                "id": "n",
                "title": "the next number",
                "description": "Write SECRET_NUMBER plus one to `out/n.txt`.",
                "files": ["conf/secret.py"],
                "checks": ["check-001"],
            }
        ]
    }
    mp = PLANNED.split("## Validate")[0] + "## Validate\n\n```bash\ngrep -qx 42 out/n.txt\n```\n"
    engine = start([level("local", "toolless.py")], planner=planner(tmp_path / "plans", plan))
    assert run_mp(engine, ws, mp).action == "completed", ws.result_file.read_text()
    assert (ws.root / "out/n.txt").read_text() == "42\n"


def test_a_pause_after_planning_resumes_without_planning_again(start, ws, tmp_path):
    """A usage limit on the worker pauses the run; the next pass replays the plan from the
    ledger (the planner is not asked again) and finishes."""
    answers, count = tmp_path / "plans", tmp_path / "count"
    limited = level("limited", "limited.py", "--kind", "usage", "--count", str(count), "--reset", "1")
    engine = start([limited], planner=planner(answers, {"tasks": [A, B, C]}))
    assert run_mp(engine, ws, PLANNED).action == "waiting"
    assert read_state(ws)["waiting"]["kind"] == "usage_limit"
    wait_for(lambda: engine.tick().action == "completed", what="the run to resume after resume_at")
    assert result_field(ws, "Certificate") == "EXACT"
    assert json.loads((answers / ".calls").read_text()) == 1
    assert names(ws, "campaign_plan_accepted", "round") == [0]


def test_a_planner_that_cannot_run_ends_blocked_naming_the_planner(start, ws):
    missing = {"name": "planner", "argv": ["/nonexistent/planner-cli", "{prompt_file}"]}
    engine = start(planner=missing)
    assert run_mp(engine, ws, PLANNED).action == "error"
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_not_found"
    text = ws.result_file.read_text()
    assert "The agent CLI of the planner (planner) could not run" in text
    assert "correct the argv of level 'planner' in `[agent.planner]`" in text


def test_a_planner_that_hangs_is_cut_off_and_the_refusal_says_so(start, ws, tmp_path):
    hung = level("planner", "hang.py", "--flag", str(tmp_path / "flag"), "--pids", str(tmp_path / "pids"))
    engine = start(planner={**hung, "idle_timeout": 2.0})  # cut off; a loaded host still starts the second in time
    assert run_mp(engine, ws, PLANNED).action == "error"
    first, second = names(ws, "campaign_plan_invalid", "error")
    assert first.startswith('no <plan nonce="') and "(the planner's call ended `" in first
    assert "ended" not in second  # the second call ended normally, without a plan
    assert result_field(ws, "Error-Kind") == "agent_invalid_plan"
