"""Lock files a killed git left behind are found and removed; live ones are kept."""

from __future__ import annotations

import subprocess

import pytest

import mp_engine.sync.locks as locks
import mp_engine.sync.recovery as recovery
from mp_engine.config.load import load_config
from mp_engine.sync.context import SyncContext
from tests.conftest import events
from tests.gitutil import git

LEFT_BY_A_KILLED_GIT = ["HEAD.lock", "index.lock", "refs/heads/main.lock", "packed-refs.lock", "config.lock"]


def test_startup_removes_every_stale_lock_and_keeps_one_a_live_process_holds(parts):
    _bare, ws, _orch, c, s = parts
    gitdir = ws.root / ".git"
    for rel in LEFT_BY_A_KILLED_GIT:
        (gitdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (gitdir / rel).write_text("")
    live = gitdir / "refs" / "heads" / "other.lock"
    with open(live, "w"):  # a git of the operator's, at work right now
        recovery.startup(c, s)
        assert live.exists()
    assert not [rel for rel in LEFT_BY_A_KILLED_GIT if (gitdir / rel).exists()]
    removed = sorted(e["path"] for e in events(ws, "git_recovered") if e["what"] == "stale lock removed")
    assert removed == sorted(f".git/{rel}" for rel in LEFT_BY_A_KILLED_GIT)
    git(ws.root, "commit", "-q", "--allow-empty", "-m", "git works again")


def test_the_object_store_is_not_walked(parts):
    _bare, ws, _orch, _c, s = parts
    pack_lock = ws.root / ".git" / "objects" / "pack" / "x.lock"
    pack_lock.write_text("")
    assert pack_lock not in locks.stale_locks(recovery.git_dirs(s))


@pytest.mark.parametrize("held", ["HEAD.lock", "refs/heads/main.lock"])
def test_gits_own_words_for_a_lock_in_the_way_are_recognised(parts, held):
    _bare, ws, _orch, _c, _s = parts
    (ws.root / ".git" / held).write_text("")
    proc = subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "x"], cwd=ws.root, capture_output=True, text=True
    )
    assert proc.returncode != 0 and locks.is_lock_error(proc.stderr), proc.stderr
    assert not locks.is_lock_error("fatal: could not read Username for 'https://github.com'")


def test_a_context_needs_no_repository_to_remove_nothing(ws):
    c = SyncContext(ws, load_config(ws.root).git)
    assert locks.remove_stale_locks(c, [ws.root / "no-git-here"]) == []


def test_a_lock_a_live_git_holds_is_never_removed_and_goes_when_that_git_is_killed(parts, tmp_path):
    """A real git holding `index.lock` (a `git commit` waiting in its editor): not stale while
    it lives, through psutil on any platform it covers (issue #40); stale once it is killed."""
    import os
    import signal
    import sys

    from tests.conftest import wait_for

    _bare, ws, _orch, c, s = parts
    gate = tmp_path / "gate"
    editor = tmp_path / "editor.py"
    editor.write_text(f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists():\n    time.sleep(0.05)\n")
    (ws.root / "change.txt").write_text("x\n")
    git(ws.root, "add", "change.txt")
    git(ws.root, "commit", "-qm", "a file to change")
    (ws.root / "change.txt").write_text("y\n")
    env = {**os.environ, "GIT_EDITOR": f"{sys.executable} {editor}"}  # `commit -a` holds the index meanwhile
    proc = subprocess.Popen(["git", "commit", "-a", "-q"], cwd=ws.root, env=env, start_new_session=True)
    lock = ws.root / ".git" / "index.lock"
    try:
        wait_for(lock.exists, what="git commit holding index.lock")
        assert locks.remove_stale_locks(c, recovery.git_dirs(s)) == []
        assert lock.exists()
        os.killpg(proc.pid, signal.SIGKILL)  # the way a crash leaves it
        proc.wait(timeout=30)
        assert lock.exists()
        assert locks.remove_stale_locks(c, recovery.git_dirs(s)) == [".git/index.lock"]
    finally:
        gate.touch()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
