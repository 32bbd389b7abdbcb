"""Parallel tasks (mp_engine/agent/run/scheduler.py, issues #29 and #40) through `Engine.tick()`, with
fake agent CLIs that take a set time per call, in a real git repository: tasks overlap,
each in its own worktree; each accepted task is one commit on `mp/<MP-id>`, integrated
one at a time; a conflict or a check that breaks on the combined work sends it back."""

from __future__ import annotations

from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.engine import Engine
from tests.agentutil import calls, configure, level, only_run, progress, records
from tests.conftest import drop, events, read_state, result_field, wait_for
from tests.gitutil import git


def listed(*items: str, checks: list[tuple[str, str]]) -> str:
    """A listed agent MP: its items, then one check per (MT id, command)."""
    body = "\n".join(f"{n}. {item}" for n, item in enumerate(items, 1))
    blocks = "\n\n".join(f"```bash\n# {mt}\n{cmd}\n```" for mt, cmd in checks)
    return f"# MP-9.1 Parallel work\nExecutor: agent\n\n{body}\n\n## Validate\n\n{blocks}\n"


FIVE = listed(
    'Write "a" to `out/a.txt`. (after none)',
    'Write "b" to `out/b.txt`. (after none)',
    'Write "c" to `out/c.txt`. (after none)',
    'Write "d" to `out/d.txt`. (after none)',
    'Write "e" to `out/e.txt`. (after MT-001, MT-002, MT-003, MT-004)',
    checks=[(f"MT-00{n}", f"grep -qx {c} out/{c}.txt") for n, c in enumerate("abcde", 1)],
)

TWO = listed(
    'Write "a" to `out/a.txt`. (after none)',
    'Write "b" to `out/b.txt`. (after none)',
    checks=[("MT-001", "grep -qx a out/a.txt"), ("MT-002", "grep -qx b out/b.txt")],
)

NOTES = listed(  # two tasks that append to the same file: the second to integrate conflicts
    'Append "a" to `notes.txt`. (after none)',
    'Append "b" to `notes.txt`. (after none)',
    checks=[("MT-001", "grep -qx a notes.txt"), ("MT-002", "grep -qx b notes.txt")],
)


def subjects(ws: Workspace, run, branch: str = "mp/MP-9.1") -> list[str]:
    """The commits the run made on its work branch, oldest first."""
    base = progress(run)["base"]["head"]
    return git(ws.root, "log", "--format=%s", branch, "--not", base).splitlines()[::-1]


def test_independent_tasks_run_at_once_and_the_one_that_needs_them_after_all_integrated(engine_for, ws, tmp_path):
    log = tmp_path / "calls.jsonl"
    engine = engine_for([level("fast", "good.py", "--log", str(log), "--sleep", "1")], max_parallel=4)
    drop(ws, FIVE)
    assert engine.tick().action == "completed"
    assert result_field(ws, "Status") == "COMPLETED"
    run = only_run(ws)
    assert (run.dir / "agent" / "certificate.json").read_text().count('"EXACT"') == 1
    started = {c["mt"]: c["t0"] for c in calls(log)}
    first_four = [started[f"MT-00{n}"] for n in range(1, 5)]
    integrated = {e["mt"]: e["ts"] for e in events(ws, "micro_task_integrated")}
    assert len(integrated) == 5
    # at once: all four calls had started before the first of them was integrated (no clock
    # bound: a loaded machine may take more than the calls' 1 s to start four processes)
    assert max(first_four) < min(_epoch(integrated[f"MT-00{n}"]) for n in range(1, 5))
    assert started["MT-005"] > max(
        _epoch(integrated[f"MT-00{n}"]) for n in range(1, 5)
    )  # it started on the integrated work of all four
    commits = subjects(ws, run)  # one commit per task, the fifth last
    assert len(commits) == 5 and {s.split(":")[0] for s in commits} == {f"MP-9.1 MT-00{n}" for n in range(1, 6)}
    assert commits[-1].startswith("MP-9.1 MT-005:")
    assert all(c["cwd"].endswith(f"/{run.run_id}/{c['mt']}") for c in calls(log))  # each in its own worktree
    assert (ws.root / "out" / "e.txt").read_text() == "e\n"  # landed on the channel branch
    tasks = progress(run)["micro_tasks"]
    assert set(tasks[0]["overlapped_with"]) == {"MT-002", "MT-003", "MT-004"}
    assert tasks[4]["overlapped_with"] == [] and all(t["started_at"] and t["ended_at"] for t in tasks)
    assert git(ws.root, "for-each-ref", "refs/heads/mp-task/") == ""  # the scratch branches are gone
    assert not (ws.local_dir / "work" / run.run_id).exists()
    assert {e["mt"] for e in events(ws, "micro_task_started")} == {f"MT-00{n}" for n in range(1, 6)}


def _epoch(iso: str) -> float:
    from mp_engine.core.clock import parse_iso

    return parse_iso(iso).timestamp()


def test_two_tasks_that_edit_the_same_line_conflict_and_the_second_is_retried_on_the_new_tip(engine_for, ws, tmp_path):
    (ws.root / "notes.txt").write_text("start\n")  # committed by `configure`
    log = tmp_path / "calls.jsonl"
    engine = engine_for([level("fast", "good.py", "--log", str(log), "--sleep", "0.5")], max_parallel=2)
    mp = NOTES
    drop(ws, mp)
    assert engine.tick().action == "completed"  # no halt
    run = only_run(ws)
    conflict = events(ws, "micro_task_conflict")
    assert [(e["mt"], e["outcome"]) for e in conflict] == [("MT-002", "conflict")]
    assert "notes.txt" in conflict[0]["detail"]
    assert [c["mt"] for c in calls(log)] == ["MT-001", "MT-002", "MT-002"]  # retried once, on the new tip
    again = (run.dir / "agent" / "MT-002" / "iter-002" / "prompt.md").read_text()
    assert "could not join the work integrated meanwhile" in again and "<<<<<<<" in again
    assert (ws.root / "notes.txt").read_text() == "start\na\nb\n"
    assert [s.split(":")[0] for s in subjects(ws, run)] == ["MP-9.1 MT-001", "MP-9.1 MT-002"]
    assert (run.dir / "agent" / "INT-2" / "iter-001" / "conflict.diff").exists()


def test_a_task_whose_checks_break_on_the_combined_work_is_sent_back_not_integrated(engine_for, ws, tmp_path):
    engine = engine_for([level("fast", "good.py", "--sleep", "0.3")], max_parallel=2, max_iterations=4)
    mp = listed(
        'Write "a" to `out/a.txt`. (after none)',
        'Write "b" to `out/b.txt`. (after none)',
        checks=[("MT-001", "grep -qx a out/a.txt"), ("MT-002", "test ! -e out/a.txt && grep -qx b out/b.txt")],
    )
    drop(ws, mp)
    assert engine.tick().action == "error"
    run = only_run(ws)
    broke = [e for e in events(ws, "micro_task_conflict") if e["outcome"] == "broke"]
    assert broke and broke[0]["mt"] == "MT-002" and broke[0]["failing"] == ["check-002"]
    assert [s.split(":")[0] for s in subjects(ws, run)] == ["MP-9.1 MT-001"]  # never MT-002
    tasks = {t["mt_id"]: t for t in progress(run)["micro_tasks"]}
    assert tasks["MT-001"]["status"] == "completed" and tasks["MT-002"]["status"] != "completed"
    assert not (ws.root / "out" / "b.txt").exists()  # nothing landed: the MP did not pass


def test_tasks_whose_planned_files_overlap_never_run_at_once(engine_for, ws, tmp_path):
    from tests.agentutil import planner, task

    log = tmp_path / "calls.jsonl"
    plan = {
        "tasks": [
            task("T1", ("a", "out/a.txt"), checks=["check-001"], files=["src/shared.py"]),
            task("T2", ("b", "out/b.txt"), checks=["check-002"], files=["src/shared.py"]),
            task("T3", ("c", "out/c.txt"), checks=["check-003"], files=["src/other.py"]),
        ]
    }
    engine = engine_for(
        [level("fast", "good.py", "--log", str(log), "--sleep", "0.5")],
        max_parallel=3,
        planner=planner(tmp_path / "answers", plan),
    )
    checks = "\n\n".join(f"```bash\ngrep -qx {c} out/{c}.txt\n```" for c in "abc")
    drop(ws, f"# MP-9.1 Planned\nExecutor: agent\nPlan: auto\n\nThree files.\n\n## Validate\n\n{checks}\n")
    assert engine.tick().action == "completed"
    started = {c["mt"]: c["t0"] for c in calls(log) if c["mt"].startswith("MT-")}
    integrated = {e["mt"]: _epoch(e["ts"]) for e in events(ws, "micro_task_integrated")}
    # T1 and T3 at once: each started before the other was integrated (no clock bound)
    assert started["MT-003"] < integrated["MT-001"] and started["MT-001"] < integrated["MT-003"]
    assert started["MT-002"] > integrated["MT-001"]  # T2 only after T1, which shares its file


def test_a_usage_limit_holds_the_tasks_of_its_level_and_the_mp_waits_for_one_reset(engine_for, ws, tmp_path):
    from tests.agentutil import add_route

    engine = engine_for(
        [
            level(
                "limited",
                "limited.py",
                "--kind",
                "usage",
                "--count",
                str(tmp_path / "n"),
                "--times",
                "2",
                "--reset",
                "2",
            )
        ],
        max_parallel=3,
    )
    add_route(ws, "docs", level("docs", "good.py", "--sleep", "0.3"))
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    mp = listed(
        'Write "a" to `out/a.txt`. (after none)',
        'Write "b" to `out/b.txt`. (after none)',
        '[docs] Write "c" to `out/c.txt`. (after none)',
        checks=[(f"MT-00{n}", f"grep -qx {c} out/{c}.txt") for n, c in enumerate("abc", 1)],
    )
    drop(ws, mp)
    result = engine.tick()
    assert result.action == "waiting"
    state = read_state(ws)
    assert state["waiting"]["kind"] == "usage_limit" and state["status"] == "RUNNING"
    held = [e for e in events(ws, "micro_task_pause_requested") if e.get("level_name") == "limited"]
    assert {e["mt"] for e in held} == {"MT-001", "MT-002"}  # every task at that level
    # The MP waits once, until the latest reset its held calls reported (two calls that hit the
    # limit in different seconds each report their own)
    resets = {e["resume_at"] for e in events(ws, "micro_task_pause_requested")}
    assert max(resets) == state["waiting"]["resume_at"] and len(events(ws, "mp_waiting")) == 1
    tasks = {t["mt_id"]: t["status"] for t in progress(only_run(ws))["micro_tasks"]}
    assert tasks["MT-003"] == "completed"  # the other level's task went on
    assert tasks["MT-001"] == tasks["MT-002"] == "active"
    assert {r["mt"] for r in records(only_run(ws))} == {"MT-003"}  # the limited calls are not iterations
    wait_for(lambda: engine.tick().action == "completed", timeout=60, what="the run after the reset")
    assert {t["mt_id"]: t["status"] for t in progress(only_run(ws))["micro_tasks"]} == dict.fromkeys(
        ("MT-001", "MT-002", "MT-003"), "completed"
    )


def test_a_stop_while_a_level_is_held_keeps_its_reset(engine_for, ws, tmp_path):
    """A stop arrives while one level waits for its usage limit's reset and another level's
    task still runs: the run waits for the reset (it is not forgotten as a plain stop)."""
    import threading

    from tests.agentutil import add_route

    configure(
        ws,
        [level("limited", "limited.py", "--kind", "usage", "--count", str(tmp_path / "n"), "--reset", "600")],
        max_parallel=2,
    )
    gate = tmp_path / "gate"
    add_route(ws, "docs", level("docs", "good.py", "--wait-for", str(gate)))
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    drop(
        ws,
        listed(
            'Write "a" to `out/a.txt`. (after none)',
            '[docs] Write "c" to `out/c.txt`. (after none)',
            checks=[("MT-001", "grep -qx a out/a.txt"), ("MT-002", "grep -qx c out/c.txt")],
        ),
    )
    done: list = []
    ticking = threading.Thread(target=lambda: done.append(engine.tick()))
    ticking.start()
    try:
        wait_for(lambda: events(ws, "micro_task_pause_requested"), what="the limited level held")
        engine.stop.set()
    finally:
        gate.touch()
        ticking.join(timeout=60)
    assert done and done[0].action == "waiting"
    state = read_state(ws)
    assert state["waiting"]["kind"] == "usage_limit"
    (held,) = events(ws, "micro_task_pause_requested")
    assert state["waiting"]["resume_at"] == held["resume_at"]


def test_a_cancel_stops_every_running_task(engine_for, ws, tmp_path):
    import threading

    from mp_engine.inbox.cancel_request import request_on_host
    from tests.unit.agent.run.test_loop import alive

    log = tmp_path / "calls.jsonl"
    engine = engine_for([level("slow", "good.py", "--log", str(log), "--sleep", "120")], max_parallel=2)
    mp = TWO
    drop(ws, mp)
    done = []
    ticking = threading.Thread(target=lambda: done.append(engine.tick()))
    ticking.start()
    wait_for(lambda: len(calls(log)) == 2, what="both tasks' calls under way")
    request_on_host(ws, "MP-9.1")
    ticking.join(timeout=60)
    assert done and done[0].action == "cancelled"
    assert result_field(ws, "Status") == "CANCELLED"
    assert not any(alive(c["pid"]) for c in calls(log))  # every task's process group stopped


def test_with_max_parallel_1_calls_and_commits_are_those_of_a_recorded_run(engine_for, ws, tmp_path):
    """`max_parallel = 1` is the one-at-a-time loop: the same calls in the same order and
    the same commits as this run recorded before parallel tasks existed (issue #29)."""
    log, gate = tmp_path / "calls.jsonl", tmp_path / "gate"
    gate.touch()  # open: its second iteration does not wait
    engine = engine_for([level("fast", "second.py", "--log", str(log), "--gate", str(gate))], max_parallel=1)
    drop(ws, FIVE)
    assert engine.tick().action == "completed"
    recorded_calls = [(f"MT-00{n}", i) for n in range(1, 6) for i in (1, 2)]
    assert [(c["mt"], c["iteration"]) for c in calls(log)] == recorded_calls
    assert [s.split(":")[0] for s in subjects(ws, only_run(ws))] == [f"MP-9.1 MT-00{n}" for n in range(1, 6)]
    assert not events(ws, "micro_task_started") and not events(ws, "micro_task_integrated")
    assert all(c["cwd"].endswith(only_run(ws).run_id) for c in calls(log))  # one worktree, as before


def test_status_the_heartbeat_and_the_result_show_every_running_task(engine_for, ws, tmp_path):
    import threading

    from mp_engine.commands.status import render_status
    from mp_engine.daemon.health import progress_of, status_line
    from mp_engine.record.stateview import read_view
    from mp_engine.views.status import status_report
    from tests.conftest import wait_for

    log, gate = tmp_path / "calls.jsonl", tmp_path / "gate"
    engine = engine_for([level("fast", "good.py", "--log", str(log), "--wait-for", str(gate))], max_parallel=2)
    mp = TWO
    drop(ws, mp)
    done = []
    ticking = threading.Thread(target=lambda: done.append(engine.tick()))
    ticking.start()
    try:
        wait_for(lambda: len(calls(log)) == 2, what="both calls under way")
        run_id = read_state(ws)["run_id"]

        def both_shown():
            report = status_report(ws, load_config(ws.root))
            running = report.get("agent", {}).get("running") or []
            return report if {r["mt"] for r in running} == {"MT-001", "MT-002"} else None

        report = wait_for(both_shown, what="status --json listing both running tasks")
        text = render_status(report)
        assert "2 of at most 2 micro-tasks running" in text and "MT-001: iteration 1" in text
        assert {t["mt"] for t in progress_of(ws, run_id)["micro_tasks"]} == {"MT-001", "MT-002"}  # the heartbeat's
        assert "MT-001, MT-002 (2 micro-tasks at once)" in status_line(ws, read_view(ws.state_file))
    finally:
        gate.touch()
        ticking.join(timeout=60)
    assert done and done[0].action == "completed"
    table = ws.result_file.read_text()
    assert "| Started | Ended | Ran with |" in table and "| MT-002 |" in table
    import json

    tasks = json.loads((ws.system_dir / "RESULT_last.json").read_text())["micro_tasks"]
    assert all(t["started_at"] and t["ended_at"] for t in tasks)
    assert {t["mt_id"]: t["overlapped_with"] for t in tasks} == {"MT-001": ["MT-002"], "MT-002": ["MT-001"]}


def test_an_mp_may_lower_max_parallel_never_raise_it(ws):
    from mp_engine.agent.run.loop import parallel_limit
    from mp_engine.inbox.mpfile import parse

    configure(ws, [level("fast", "good.py")], max_parallel=3)
    cfg = load_config(ws.root).agent
    for header, limit in (("", 3), ("Max-Parallel: 1\n", 1), ("Max-Parallel: 2\n", 2), ("Max-Parallel: 8\n", 3)):
        mp = parse(f"# MP-9.9\nExecutor: agent\n{header}\nDo it.\n\n## Validate\n\n```bash\ntrue\n```\n".encode())
        assert parallel_limit(cfg, mp) == limit, header
