"""Evidence and the workspace fingerprint, with and without git."""

from __future__ import annotations

import hashlib
import json

import pytest

from mp_engine.agent.evidence import IterationEvidence, Worktree
from mp_engine.core.gitcmd import GitFailed
from tests.gitutil import git


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "app.py").write_text("v1\n")
    git(root, "add", "app.py")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return root


def test_the_fingerprint_moves_with_content_not_with_engine_files(repo):
    w = Worktree(repo)
    base = w.snapshot()
    (repo / "SESSION_STATE.json").write_text("{}")  # the engine's own file
    (repo / "SYSTEM").mkdir()
    (repo / "SYSTEM" / "x").write_text("y")
    assert w.snapshot().digest == base.digest
    (repo / "app.py").write_text("v2\n")
    changed = w.snapshot()
    assert changed.digest != base.digest and "app.py" in changed.files
    (repo / "app.py").write_text("v1\n")  # back to the committed content
    assert w.snapshot().digest == base.digest


def test_the_agents_own_commits_count_and_show_in_the_diffstat(repo):
    w = Worktree(repo)
    base = w.snapshot()
    (repo / "new.py").write_text("print(1)\n")
    git(repo, "add", "new.py")
    git(repo, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "agent commit")
    snap = w.snapshot()
    assert snap.head != base.head and snap.digest != base.digest
    stat = w.diffstat(base, snap)
    assert "new.py" in stat and "1 new commit(s) since the loop started" in stat


def test_without_git_every_file_counts(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    w = Worktree(tmp_path)
    base = w.snapshot()
    (tmp_path / "b.txt").write_text("b")
    snap = w.snapshot()
    assert snap.head is None and set(snap.files) == {"a.txt", "b.txt"}
    assert " A b.txt" in w.diffstat(base, snap)


def test_a_git_failure_is_reported_not_taken_for_no_change(repo):
    w = Worktree(repo)
    (repo / ".git" / "HEAD").write_text("garbage\n")  # a repository git cannot read
    with pytest.raises(GitFailed):
        w.snapshot()


def test_the_manifest_hashes_every_file_of_the_iteration(tmp_path):
    ev = IterationEvidence(tmp_path, "MT-001", 2)
    assert ev.rel == "agent/MT-001/iter-002"
    ev.write("prompt.md", "the prompt")
    out = tmp_path / "steps" / "check.stdout"
    out.parent.mkdir()
    out.write_bytes(b"check output")
    ev.add(out)
    ev.add(tmp_path / "missing")  # nothing to hash, nothing recorded
    manifest = json.loads((tmp_path / ev.write_manifest()).read_text())
    assert manifest["files"] == {
        "agent/MT-001/iter-002/prompt.md": hashlib.sha256(b"the prompt").hexdigest(),
        "steps/check.stdout": hashlib.sha256(b"check output").hexdigest(),
    }


def test_the_diffstat_lists_untracked_files_and_says_when_nothing_changed(repo):
    w = Worktree(repo)
    base = w.snapshot()
    assert w.diffstat(base, w.snapshot()) == " no changes since the loop started\n"
    (repo / "notes").mkdir()
    (repo / "notes" / "new.md").write_text("x\n")
    snap = w.snapshot()
    assert snap.untracked == ["notes/new.md"]
    assert " 1 untracked file(s):\n   notes/new.md\n" in w.diffstat(base, snap)


def test_what_the_engines_commits_told_it_is_not_asked_again(repo, monkeypatch):
    w = Worktree(repo)
    base = w.snapshot()
    asked: list[str] = []
    real = w._git
    monkeypatch.setattr(w, "_git", lambda *args: asked.append(args[0]) or real(*args))

    def engine_commit(message: str) -> None:  # as WorkBranch.commit reports it
        git(repo, "-c", "user.name=e", "-c", "user.email=e@e", "commit", "-q", "--allow-empty", "-m", message)
        sha, tree, parent, parent_tree = git(repo, "rev-parse", "HEAD", "HEAD^{tree}", "HEAD^", "HEAD^^{tree}").split()
        w.learn(sha, tree, parent, parent_tree)

    (repo / "new.py").write_text("x\n")
    git(repo, "add", "new.py")
    engine_commit("MT-001")
    first = w.diffstat(base, w.snapshot())
    assert "new.py" in first and "1 new commit(s)" in first and asked.count("rev-list") == 0
    engine_commit("MT-002")  # empty: the same tree, so the same diff
    asked.clear()
    assert "2 new commit(s)" in w.diffstat(base, w.snapshot())
    assert asked == ["status"]  # the snapshot only: no diff, no rev-list
    # The agent commits by itself: git counts what the engine did not make.
    git(repo, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-q", "--allow-empty", "-m", "agent")
    engine_commit("MT-003")
    stat = w.diffstat(base, w.snapshot())
    assert "4 new commit(s)" in stat and asked.count("rev-list") == 1
    (repo / "app.py").write_text("v2\n")  # a change over HEAD: the diff is asked again
    asked.clear()
    assert "app.py" in w.diffstat(base, w.snapshot()) and "diff" in asked
