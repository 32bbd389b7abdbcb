"""The agent's work branch (agent/workbranch.py, issue #17): unverified agent work never
lands on the channel branch."""

from __future__ import annotations

import json

import pytest

from mp_engine.agent.run.workbranch import NoGit, WorkBranch, branch_name
from mp_engine.config.load import load_config
from mp_engine.pipeline.engine import Engine
from tests.agentutil import GREET, ONE, configure, level, only_run
from tests.conftest import drop, result_field
from tests.gitutil import git


@pytest.fixture
def repo(ws):
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "workspace"]):
        git(ws.root, *args)
    return ws


def test_each_commit_is_the_agents_work_without_the_engines_files(repo):
    wb = WorkBranch(repo, "MP-7.1", "run-1")
    root = wb.ensure()
    assert wb.ensure() == root and git(root, "rev-parse", "--abbrev-ref", "HEAD").strip() == "mp/MP-7.1"
    (root / "src.txt").write_text("work\n")
    (root / "SESSION_STATE.json").write_text("{}")  # the agent scribbled on the engine's copy
    (root / "SYSTEM" / "x.md").write_text("no")
    (root / ".aider.tags.cache.v4").mkdir()  # an agent CLI's scratch beside the work
    (root / ".aider.tags.cache.v4" / "cache.db").write_text("tags")
    (root / ".aider.chat.history.md").write_text("the prompt and its nonce")
    wb.commit("MP-7.1 MT-001: write src", "Evidence: SYSTEM/runs/run-1/agent/MT-001/iter-001")
    files = git(root, "show", "--name-only", "--format=", "HEAD").split()
    assert files == ["src.txt"] and not wb.leftovers()  # the scratch is not work left over
    assert "Evidence: SYSTEM/runs/run-1" in git(root, "log", "-1", "--format=%b")
    made = wb.commit("MP-7.1 MT-002: nothing to do")  # an accepted MT is a commit, even an empty one
    assert git(root, "log", "--format=%s", "-2").split("\n")[0] == "MP-7.1 MT-002: nothing to do"
    # What the commit reports (the evidence learns from it): itself, its parent, both trees.
    assert made.sha == git(root, "rev-parse", "HEAD").strip() and made.parent == git(root, "rev-parse", "HEAD^").strip()
    assert made.tree == made.parent_tree == git(root, "rev-parse", "HEAD^{tree}").strip()


def test_exact_work_fast_forwards_or_merges_and_other_work_stays_on_the_branch(repo):
    wb = WorkBranch(repo, "MP-7.2", "run-2")
    root = wb.ensure()
    (root / "a.txt").write_text("a\n")  # left uncommitted: landing commits it first
    not_exact = wb.land("merge", exact=False)
    assert not not_exact.landed and "untouched" in not_exact.note and not (repo.root / "a.txt").exists()
    landed = wb.land("merge", exact=True)
    assert landed.landed and landed.how == "fast-forward" and (repo.root / "a.txt").read_text() == "a\n"
    wb.remove()
    assert not root.exists() and git(repo.root, "rev-parse", "mp/MP-7.2")
    # The channel branch moved meanwhile: a merge commit.
    wb2 = WorkBranch(repo, "MP-7.3", "run-3")
    (wb2.ensure() / "b.txt").write_text("b\n")
    (repo.root / "other.txt").write_text("orchestrator\n")
    git(repo.root, "add", "other.txt")
    git(repo.root, "commit", "-qm", "the channel moved")
    merged = wb2.land("merge", exact=True)
    assert merged.how == "merge" and git(repo.root, "log", "-1", "--format=%s").strip() == "MP-7.3: merge mp/MP-7.3"
    # land = "branch": verified work waits for review.
    wb3 = WorkBranch(repo, "MP-7.4", "run-4")
    (wb3.ensure() / "c.txt").write_text("c\n")
    review = wb3.land("branch", exact=True)
    assert not review.landed and review.how == "branch" and not (repo.root / "c.txt").exists()


def test_a_workspace_without_git_or_without_a_commit_cannot_have_a_branch(ws):
    with pytest.raises(NoGit):
        WorkBranch(ws, "MP-7.5", "r").ensure()
    git(ws.root, "init", "-q")
    with pytest.raises(NoGit, match="no commit"):
        WorkBranch(ws, "MP-7.5", "r").ensure()
    assert branch_name("MP-1.2 weird/id") == "mp/MP-1.2_weird_id"


def engine(ws, levels, monkeypatch, **opts) -> Engine:
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    configure(ws, levels, **opts)
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def test_an_agent_mp_in_a_workspace_without_git_is_need_info_with_the_fix(ws, monkeypatch):
    eng = engine(ws, [level("good", "good.py")], monkeypatch, git_repo=False)
    drop(ws, ONE)
    assert eng.tick().action == "error"
    assert result_field(ws, "Certificate") == "NEED_INFO"
    assert "git init" in ws.result_file.read_text() and not (ws.root / "out").exists()


def test_land_branch_leaves_verified_work_for_review_and_the_result_names_it(ws, monkeypatch):
    eng = engine(ws, [level("good", "good.py")], monkeypatch, land="branch")
    drop(ws, ONE)
    assert eng.tick().action == "completed"
    assert not (ws.root / "out/a.txt").exists() and git(ws.root, "show", "mp/MP-3.2:out/a.txt").strip() == "hello"
    doc = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert doc["work"]["branch"] == "mp/MP-3.2" and doc["work"]["how"] == "branch" and not doc["work"]["landed"]
    assert "## Work branch" in ws.result_file.read_text() and "for you to review" in ws.result_file.read_text()
    assert not (ws.local_dir / "work" / only_run(ws).run_id).exists()


def test_the_result_names_each_micro_tasks_commit(ws, monkeypatch):
    """issue #17, visible: RESULT_last.json and the Micro-tasks table give each accepted
    micro-task's commit on the work branch (which then landed)."""
    eng = engine(ws, [level("good", "good.py")], monkeypatch)
    drop(ws, GREET)
    assert eng.tick().action == "completed"
    doc = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    tasks = {t["mt_id"]: t["commit"] for t in doc["micro_tasks"]}
    for mt, commit in tasks.items():
        assert git(ws.root, "log", "-1", "--format=%s", commit).startswith(f"MP-3.1 {mt}: ")
    assert git(ws.root, "merge-base", "--is-ancestor", tasks["MT-002"], "HEAD") == ""  # landed
    table = ws.result_file.read_text()
    assert f"`{tasks['MT-001'][:12]}`" in table and f"`{tasks['MT-002'][:12]}`" in table


def test_a_resumed_run_whose_worktree_is_gone_gets_it_back_on_its_branch_unchanged(ws):
    """A crash after the end of a run removed the worktree, before its result was recorded:
    the restart must not reset mp/<MP-id> to HEAD (the run's commits would be lost)."""
    from mp_engine.agent.run.workbranch import WorkBranch
    from tests.agentutil import configure, level
    from tests.gitutil import git

    configure(ws, [level("fast", "good.py")])
    work = WorkBranch(ws, "MP-9.4", "20261126T000000Z-MP-9.4")
    work.ensure()
    (work.path / "done.txt").write_text("done\n")
    tip = work.commit("MP-9.4 MT-001: done", "Evidence: e").sha
    work.remove()
    work.ensure(resumed=True)
    assert git(ws.root, "rev-parse", work.branch) == tip and (work.path / "done.txt").exists()
    work.remove()
    work.ensure()  # a fresh run of the same MP id starts from HEAD again
    assert git(ws.root, "rev-parse", work.branch) == git(ws.root, "rev-parse", "HEAD")
