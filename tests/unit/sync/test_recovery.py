"""Startup of the channel: what a crash left half-done is undone, leftovers committed,
and a repository the engine cannot work in is refused with the command that fixes it."""

from __future__ import annotations

import pytest

import mp_engine.sync.recovery as recovery
from mp_engine.core.errors import SyncError
from mp_engine.sync.context import PROCESSED_REF
from mp_engine.sync.session import GitSession
from tests.conftest import events
from tests.gitutil import git


def test_a_stale_index_lock_is_removed(parts):
    _bare, ws, _orch, c, s = parts
    (ws.root / ".git" / "index.lock").write_text("")
    recovery.startup(c, s)
    assert not (ws.root / ".git" / "index.lock").exists()
    first = events(ws, "git_recovered")[0]
    assert (first["what"], first["path"]) == ("stale lock removed", ".git/index.lock")


def test_a_half_finished_rebase_is_aborted(parts):
    _bare, ws, _orch, c, s = parts
    for side in ("a", "b"):
        git(ws.root, "checkout", "-q", "-B", side, "main")
        (ws.root / "x.txt").write_text(f"{side}\n")
        git(ws.root, "add", "x.txt")
        git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", side)
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "rebase", "-q", "a", check=False)  # conflicts
    assert (ws.root / ".git" / "rebase-merge").exists()
    with pytest.raises(SyncError, match="checkout main"):  # the abort leaves it on b, not main
        recovery.startup(c, s)
    assert not (ws.root / ".git" / "rebase-merge").exists()
    assert any(e["what"] == "half-finished rebase aborted" for e in events(ws, "git_recovered"))


def test_the_wrong_branch_is_refused_with_the_checkout_that_fixes_it(parts):
    _bare, ws, _orch, c, s = parts
    git(ws.root, "checkout", "-q", "-b", "elsewhere")
    with pytest.raises(SyncError, match=f"git -C {ws.root} checkout main"):
        recovery.startup(c, s)


def test_a_workspace_inside_another_repository_is_refused(tmp_path):
    from mp_engine.core.workspace import init_workspace

    git(tmp_path, "init", "-q", "-b", "main")
    ws, _ = init_workspace(tmp_path / "inner")
    with pytest.raises(SyncError, match=f"mp-engine init --remote URL {ws.root}"):
        GitSession(ws.root, 30)  # the repository above is not the workspace's


def test_protocol_files_left_uncommitted_are_committed(parts):
    _bare, ws, _orch, c, s = parts
    (ws.root / "SESSION_STATE.json").write_text((ws.root / "SESSION_STATE.json").read_text() + " ")
    recovery.startup(c, s)
    assert git(ws.root, "log", "-1", "--format=%s") == "mp-engine: commit protocol files left by a restart"
    assert s.rev(PROCESSED_REF) == s.rev(c.tracking)


def test_a_url_remote_becomes_origin_and_a_conflicting_origin_is_refused(parts, tmp_path):
    _bare, ws, _orch, c, s = parts
    c.cfg = c.cfg.model_copy(update={"remote": str(tmp_path / "other.git")})
    with pytest.raises(SyncError, match="git remote set-url origin"):
        recovery.ensure_remote(c, s)
    c.cfg = c.cfg.model_copy(update={"remote": "upstream"})
    with pytest.raises(SyncError, match="remote add upstream"):
        recovery.ensure_remote(c, s)


def test_held_paths_sees_our_own_open_file(tmp_path):
    from mp_engine.sync.locks import held_paths

    f = tmp_path / "held"
    f.write_text("")
    with open(f):
        assert str(f) in held_paths()
    assert str(f) not in held_paths()


def test_a_pre_0_2_tracked_event_log_is_untracked_once(parts):
    _bare, ws, _orch, c, s = parts
    legacy = ws.root / "SYSTEM" / "events.jsonl"
    legacy.write_text('{"event": "old"}\n')
    git(ws.root, "add", "-f", "SYSTEM/events.jsonl")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old layout")
    recovery.startup(c, s)
    assert git(ws.root, "ls-files", "SYSTEM/events.jsonl") == ""
    assert "/events.jsonl" in (ws.root / "SYSTEM" / ".gitignore").read_text().split()
    assert any(e["what"] == "old event log untracked" for e in events(ws, "git_recovered"))
    head = s.rev("HEAD")
    recovery.startup(c, s)
    assert s.rev("HEAD") == head  # once


def test_the_untracking_waits_while_the_operator_has_something_staged(parts):
    _bare, ws, _orch, c, s = parts
    (ws.root / "SYSTEM" / "events.jsonl").write_text("{}\n")
    git(ws.root, "add", "-f", "SYSTEM/events.jsonl")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old layout")
    (ws.root / "mine.txt").write_text("staged by the operator\n")
    git(ws.root, "add", "mine.txt")
    recovery.untrack_event_log(c, s)
    assert git(ws.root, "ls-files", "SYSTEM/events.jsonl") == "SYSTEM/events.jsonl"
    assert "mine.txt" in events(ws, "sync_failed")[-1]["error"]
