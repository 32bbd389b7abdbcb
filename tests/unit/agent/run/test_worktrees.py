"""Parallel tasks' worktrees (mp_engine/agent/run/worktrees.py) in a real repository: made
from the tip of mp/<MP-id>, refreshed to a new tip, one commit per task kept after a
crash between the commit and the integration."""

from __future__ import annotations

from mp_engine.agent.run.workbranch import WorkBranch
from mp_engine.agent.run.worktrees import TaskWorktrees
from tests.agentutil import configure, level
from tests.gitutil import git


def trees(ws) -> TaskWorktrees:
    configure(ws, [level("fast", "good.py")])
    work = WorkBranch(ws, "MP-9.2", "20261126T000000Z-MP-9.2", parallel=True)
    work.ensure()
    return TaskWorktrees(work)


def test_a_task_starts_from_the_tip_of_the_work_branch_on_a_branch_of_its_own(ws):
    t = trees(ws)
    base = t.start("MT-001")
    assert base == git(ws.root, "rev-parse", "mp/MP-9.2")
    assert git(t.path("MT-001"), "rev-parse", "--abbrev-ref", "HEAD") == "mp-task/MP-9.2/MT-001"
    assert t.path("MT-001").parent == t.work.path.parent  # beside the integration worktree, not in it
    (t.path("MT-001") / "kept.txt").write_text("work in progress\n")
    assert t.start("MT-001") == base and (t.path("MT-001") / "kept.txt").exists()  # a resumed task keeps its work


def test_a_commit_holds_the_task_s_work_and_is_made_once(ws):
    t = trees(ws)
    t.start("MT-001")
    (t.path("MT-001") / "a.txt").write_text("a\n")
    (t.path("MT-001") / "SESSION_STATE.json").write_text("{}\n")  # the engine's: never work
    first = t.commit("MT-001", "MP-9.2 MT-001: a", "Evidence: e")
    assert git(t.path("MT-001"), "show", "--name-only", "--format=", first).split() == ["a.txt"]
    assert t.commit("MT-001", "MP-9.2 MT-001: a", "Evidence: e") == first  # after a crash: the same one


def test_a_refresh_starts_the_task_over_from_the_new_tip(ws):
    t = trees(ws)
    t.start("MT-002")
    (t.path("MT-002") / "stale.txt").write_text("conflicting work\n")
    (t.work.path / "new.txt").write_text("integrated\n")
    git(t.work.path, "add", "new.txt")
    git(t.work.path, "commit", "-qm", "MP-9.2 MT-001: integrated")
    tip = git(ws.root, "rev-parse", "mp/MP-9.2")
    assert t.refresh("MT-002") == tip
    assert (t.path("MT-002") / "new.txt").exists() and not (t.path("MT-002") / "stale.txt").exists()


def test_removing_the_work_branch_removes_every_task_worktree_and_branch(ws):
    t = trees(ws)
    t.start("MT-001")
    t.start("MT-002")
    t.work.remove()
    assert not t.work.run_dir.exists()
    assert git(ws.root, "for-each-ref", "refs/heads/mp-task/") == ""
    assert git(ws.root, "rev-parse", "--verify", "mp/MP-9.2")  # the work branch stays
