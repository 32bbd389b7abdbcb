"""A task's work as commits on the work remote (mp_engine/fleet/snapshot.py), with real
git: the engine's snapshot leaves HEAD and the index alone, the worker's commit carries
only the work, and `adopt` lays it into the task's worktree without moving its branch."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mp_engine.fleet import snapshot
from tests.gitutil import git, make_remote


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "kept.txt").write_text("kept\n")
    (root / "gone.txt").write_text("gone\n")
    (root / "SYSTEM").mkdir()
    (root / "SYSTEM" / "RESULT_last.md").write_text("engine's\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return root


def test_a_snapshot_commits_the_work_on_head_without_touching_head_or_the_index(tmp_path):
    root = repo(tmp_path)
    head = git(root, "rev-parse", "HEAD")
    assert snapshot.snapshot(root, "nothing changed") == head
    (root / "new.txt").write_text("new\n")
    (root / "gone.txt").unlink()
    (root / "SYSTEM" / "RESULT_last.md").write_text("not work\n")
    commit = snapshot.snapshot(root, "MP-1 MT-001 before iteration 1")
    assert git(root, "rev-parse", "HEAD") == head and git(root, "rev-parse", f"{commit}^") == head
    assert git(root, "diff", "--cached", "--name-only") == ""  # the index is as it was
    files = git(root, "ls-tree", "-r", "--name-only", commit).splitlines()
    assert "new.txt" in files and "gone.txt" not in files
    assert git(root, "show", f"{commit}:SYSTEM/RESULT_last.md") == "engine's"  # engine files as HEAD has them


def test_work_goes_round_trip_through_a_bare_remote_and_is_adopted_without_moving_the_branch(tmp_path):
    root = repo(tmp_path)
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    (root / "task.txt").write_text("before\n")
    sent = snapshot.snapshot(root, "snapshot")
    snapshot.push(root, url, sent, "mp-task/MP-1/MT-001")
    # The worker: a clone, a worktree at the exact commit, its work committed and pushed back.
    worker = tmp_path / "worker"
    subprocess.run(["git", "clone", "-q", url, str(worker)], check=True)
    snapshot.fetch(worker, "origin", "mp-task/MP-1/MT-001", sent, "refs/mp-engine/x")
    git(worker, "checkout", "-q", "--detach", sent)
    (worker / "task.txt").write_text("after\n")
    (worker / "kept.txt").unlink()
    (worker / "SYSTEM" / "RESULT_last.md").write_text("a worker's change to an engine file\n")
    done = snapshot.commit_work(worker, "MP-1 MT-001 iteration 1 on w1")
    assert git(worker, "rev-parse", f"{done}^") == sent
    assert git(worker, "show", f"{done}:SYSTEM/RESULT_last.md") == "engine's"  # only the work is committed
    snapshot.push(worker, "origin", done, "mp-task/MP-1/MT-001")
    # The engine: fetch it and lay it into the task's worktree; its branch stays at base.
    (root / "stray.txt").write_text("untracked, not in the worker's commit\n")
    head = git(root, "rev-parse", "HEAD")
    snapshot.fetch(root, url, "mp-task/MP-1/MT-001", done, "refs/mp-engine/MT-001")
    snapshot.adopt(root, done)
    assert git(root, "rev-parse", "HEAD") == head
    assert (root / "task.txt").read_text() == "after\n" and not (root / "kept.txt").exists()
    assert not (root / "stray.txt").exists()
    assert (root / "SYSTEM" / "RESULT_last.md").read_text() == "engine's\n"


def test_a_commit_the_branch_moved_past_is_still_fetched(tmp_path):
    root = repo(tmp_path)
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    (root / "a.txt").write_text("1\n")
    first = snapshot.snapshot(root, "first")
    snapshot.push(root, url, first, "b")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--bare", url, str(clone)], check=True)
    (root / "a.txt").write_text("2\n")
    second = snapshot.snapshot(root, "second")  # not a child of `first`: the branch is forced past it
    snapshot.push(root, url, second, "b")
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", "--bare", str(other)], check=True)
    snapshot.fetch(other, url, "b", second, "refs/mp-engine/b")
    assert snapshot.has(other, second) and not snapshot.has(other, first)
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    snapshot.fetch(other, url, "b", first, "refs/mp-engine/first")  # by its id: the branch has moved on
    assert snapshot.has(other, first)
