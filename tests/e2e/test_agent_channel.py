"""End to end: an agent MP sent with `mp-engine send --wait` through a real git remote to
the real daemon, carried out by a fake agent that commits its own work."""

from __future__ import annotations

import json
import signal

import pytest

from tests.agentutil import GREET, PLANNED, configure, level, planner, task
from tests.conftest import read_state, wait_for
from tests.e2e.cmd_send.test_send import GIT_ENV, finish, send
from tests.gitutil import engine_workspace, git, make_remote, remote_file, remote_log

pytestmark = pytest.mark.daemon


def test_an_agent_mp_over_git_completes_and_the_agents_own_commits_travel(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    configure(ws, [level("good", "good.py", "--commit")])
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "engine ONLINE\n" + d.output())
    try:
        code, out, err = finish(send(tmp_path, GREET, url))
        assert code == 0, err + d.output()
        assert "Status: COMPLETED" in out and "Certificate: EXACT" in out
        assert remote_file(bare, "out/a.txt") == "hello\n" and remote_file(bare, "out/b.txt") == "bye\n"
        log = remote_log(bare)
        assert log[0] == "MP-3.1: COMPLETED" and log.count("agent: did the micro-task") == 2
        # One engine commit per accepted micro-task on mp/MP-3.1, fast-forwarded onto main.
        assert [s for s in log if s.startswith("MP-3.1 MT-")] == [
            'MP-3.1 MT-002: Write "bye" to `out/b.txt`.',
            'MP-3.1 MT-001: Write "hello" to `out/a.txt`.',
        ]
        assert json.loads(remote_file(bare, "SESSION_STATE.json"))["last_completed"] == "MP-3.1"
        # The evidence travelled too; the diff counts the commits made since the loop started
        # (the agent's own for MT-001 and MT-002, and the engine's for MT-001).
        run_id = json.loads(remote_file(bare, "SESSION_STATE.json"))["last_result"]["run_id"]
        diff = remote_file(bare, f"SYSTEM/runs/{run_id}/agent/MT-002/iter-001/diff.txt")
        assert "3 new commit(s) since the loop started" in diff and "out/b.txt" in diff
        records = [
            json.loads(remote_file(bare, f"SYSTEM/runs/{run_id}/steps/MT-00{n}_iter-001.exit.json")) for n in (1, 2)
        ]
        assert all(r["gate"] for r in records) and records[0]["head"] != records[1]["head"]
        assert "out/" not in git(ws.root, "status", "--porcelain")  # the agent's files are committed
    finally:
        d.signal(signal.SIGTERM)
        d.wait()


def test_failed_agent_work_never_reaches_main_and_its_branch_is_pushed(tmp_path, daemon_factory):
    """A lying agent (claims, checks fail) ends DIVERGED or TIMEOUT: the remote's main gets
    the result and the state only; the partial work is on mp/MP-3.1, pushed (issue #17)."""
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    configure(ws, [level("wrong", "wrong.py", "--claim")], max_iterations=3)
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "engine ONLINE\n" + d.output())
    try:
        code, out, err = finish(send(tmp_path, GREET, url))
        assert code == 1 and "Status: ERROR" in out, err + d.output()
        assert remote_file(bare, "out/a.txt") is None  # nothing of the agent's on main
        assert remote_file(bare, "out/a.txt", ref="mp/MP-3.1").startswith("WRONG")
        last = json.loads(remote_file(bare, "SYSTEM/RESULT_last.json"))
        assert last["work"]["branch"] == "mp/MP-3.1" and not last["work"]["landed"]
        assert "partial work is on branch `mp/MP-3.1`" in remote_file(bare, "SYSTEM/RESULT_last.md")
        changed = git(bare, "diff", "--name-only", "main~1", "main").split()
        assert all(p.startswith(("SYSTEM/", "SESSION_STATE.json", "Claude_Inbox/")) for p in changed), changed
    finally:
        d.signal(signal.SIGTERM)
        d.wait()


def test_a_planned_mp_over_git_lands_on_its_branch_for_review(tmp_path, daemon_factory):
    """issue #17 through the daemon and a real remote: the planner's tasks run in dependency
    order, one commit each on mp/MP-4.1, which is pushed and named (`land = "branch"`); main
    gets the result, whose JSON carries the plan's tasks and drift checks."""
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    plan = {
        "tasks": [task("b", ("bye", "out/b.txt"), checks=["check-002"], after=["a"]), task("a", ("hello", "out/a.txt"))]
    }
    configure(ws, [level("good", "good.py")], land="branch", planner=planner(tmp_path / "plans", plan))
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "engine ONLINE\n" + d.output())
    try:
        code, out, err = finish(send(tmp_path, PLANNED, url))
        assert code == 0 and "Certificate: EXACT" in out, err + d.output()
        assert remote_file(bare, "out/a.txt") is None  # main: the result only
        assert remote_file(bare, "out/b.txt", ref="mp/MP-4.1") == "bye\n"
        subjects = git(bare, "log", "--format=%s", "-2", "mp/MP-4.1").split("\n")[:2]
        assert subjects == ["MP-4.1 MT-002: task b", "MP-4.1 MT-001: task a"]
        last = json.loads(remote_file(bare, "SYSTEM/RESULT_last.json"))
        assert last["work"]["branch"] == "mp/MP-4.1" and last["work"]["how"] == "branch"
        assert [t["mt_id"] for t in last["micro_tasks"]] == ["MT-001", "MT-002"]
        assert [(c["at"], c["drift"]) for c in last["drift_checks"]] == [(50, False), (100, False)]
        assert "## Plan" in remote_file(bare, "SYSTEM/RESULT_last.md")
    finally:
        d.signal(signal.SIGTERM)
        d.wait()


def test_the_memory_of_a_correction_travels_on_the_channel(tmp_path, daemon_factory):
    """Issue #34: SYSTEM/memory.md is committed and pushed with the result that taught it."""
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    gate = tmp_path / "gate"
    gate.touch()  # second.py: wrong at each task's first iteration, right at its second
    configure(ws, [level("second", "second.py", "--gate", str(gate))])
    d = daemon_factory(ws.root, env=GIT_ENV).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "engine ONLINE\n" + d.output())
    try:
        code, out, err = finish(send(tmp_path, GREET, url))
        assert code == 0, err + d.output()
        memory = remote_file(bare, "SYSTEM/memory.md")
        assert "## MP-3.1 (" in memory
        assert '`grep -qx hello out/a.txt` (check-001, Write "hello" to `out/a.txt`.): failed first' in memory
        assert "`grep -qx bye out/b.txt` (check-002," in memory
    finally:
        d.signal(signal.SIGTERM)
        d.wait()
