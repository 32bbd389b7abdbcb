"""Pulling: ls-remote, fetch, fast-forward or rebase, and refusing a rewritten history."""

from __future__ import annotations

import pytest

import mp_engine.sync.pull as pull
from mp_engine.config.load import load_config
from mp_engine.core.errors import SyncError
from mp_engine.inbox.intake import Inbox
from mp_engine.sync.context import PROCESSED_REF, SyncContext
from tests.conftest import events
from tests.gitutil import git, push_file, push_mp


def test_ls_remote_sees_a_push_without_fetching_it(parts):
    _bare, ws, orch, c, s = parts
    tip = push_file(orch, "note.txt", "hi\n", "a note")
    assert pull.ls_remote(c, s) == tip
    assert s.rev(c.tracking) != tip  # nothing fetched yet


def test_integrate_fast_forwards_and_marks_the_tip_processed(parts):
    _bare, ws, orch, c, s = parts
    tip = push_file(orch, "note.txt", "hi\n", "a note")
    out = pull.integrate(c, s, tip, "")
    assert out.integrated and out.problem is None
    assert s.rev("HEAD") == tip == s.rev(PROCESSED_REF)
    assert (ws.root / "note.txt").read_text() == "hi\n"
    assert events(ws, "sync_pulled")[-1]["how"] == "fast-forward"
    assert not pull.integrate(c, s, tip, "").integrated  # nothing new: nothing done


def test_a_local_edit_in_the_way_is_stashed_kept_and_merged_with_the_pull(parts):
    _bare, ws, orch, c, s = parts
    lines = [f"line {i}\n" for i in range(1, 8)]
    tip = push_file(orch, "shared.txt", "".join(lines), "a shared file")
    pull.integrate(c, s, tip, "")
    (ws.root / "shared.txt").write_text("".join(["the operator's first line\n", *lines[1:]]))  # not committed
    tip = push_file(orch, "shared.txt", "".join([*lines[:-1], "their last line\n"]), "their edit")
    assert pull.integrate(c, s, tip, "").integrated  # git refused the plain fast-forward; autostash did it
    text = (ws.root / "shared.txt").read_text()
    assert text.startswith("the operator's first line\n") and text.endswith("their last line\n")
    assert s.rev("HEAD") == tip


def test_unpushed_local_commits_are_rebased_onto_the_remote(parts):
    _bare, ws, orch, c, s = parts
    (ws.root / "local.txt").write_text("ours\n")
    git(ws.root, "add", "local.txt")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "local result")
    tip = push_file(orch, "remote.txt", "theirs\n", "their commit")
    assert pull.integrate(c, s, tip, "").integrated
    assert s.is_ancestor(tip, "HEAD") and git(ws.root, "log", "-1", "--format=%s") == "local result"
    assert events(ws, "sync_pulled")[-1]["how"] == "rebase"


def test_a_conflict_aborts_cleanly_and_reports_both_sides(parts):
    _bare, ws, orch, c, s = parts
    (ws.root / "both.txt").write_text("ours\n")
    git(ws.root, "add", "both.txt")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ours")
    tip = push_file(orch, "both.txt", "theirs\n", "theirs")
    out = pull.integrate(c, s, tip, "")
    assert out.problem is not None and out.problem.kind == "git_conflict" and "both.txt" in out.problem.diagnosis
    assert git(ws.root, "status", "--porcelain", "--untracked-files=no") == ""
    assert c.store.blocked()["kind"] == "conflict"
    assert pull.integrate(c, s, tip, "").problem is None  # reported once, until the remote moves


def test_a_force_pushed_branch_is_refused_and_nothing_is_pulled(parts):
    bare, ws, orch, c, s = parts
    tip = push_file(orch, "note.txt", "hi\n", "a note")
    pull.integrate(c, s, tip, "")
    git(orch, "reset", "-q", "--hard", "HEAD~1")
    (orch / "evil.txt").write_text("rewritten\n")
    git(orch, "add", "evil.txt")
    git(orch, "commit", "-qm", "rewrite")
    git(orch, "push", "-q", "--force", "origin", "HEAD:main")
    rewritten = git(bare, "rev-parse", "main")
    out = pull.integrate(c, s, rewritten, "")
    assert out.problem is not None and out.problem.kind == "history_rewritten"
    assert not (ws.root / "evil.txt").exists() and s.rev("HEAD") == tip


def test_a_fresh_repository_adopts_the_remote_as_it_is(tmp_path, channel):
    from mp_engine.config.load import load_config
    from mp_engine.core.workspace import init_workspace
    from mp_engine.sync.context import SyncContext
    from mp_engine.sync.session import GitSession

    bare, url, _ws, orch = channel
    tip = push_file(orch, "note.txt", "from the channel\n", "a note")
    ws, _ = init_workspace(tmp_path / "fresh")
    git(ws.root, "init", "-q", "-b", "main")
    git(ws.root, "remote", "add", "origin", url)
    c = SyncContext(ws, load_config(ws.root).git)
    s = GitSession(ws.root, 30)
    try:
        out = pull.integrate(c, s, pull.ls_remote(c, s), "")
        assert out.integrated and s.rev("HEAD") == tip == s.rev(PROCESSED_REF)
        assert events(ws, "sync_pulled")[-1]["how"] == "adopted"
    finally:
        s.close()


def test_a_pull_that_fails_while_the_branch_moves_takes_nothing_into_the_queue(parts):
    """The waiting MP is queued before the branch moves (the pull would replace it); when
    git then fails (here a stale index.lock), nothing was integrated, so the queue lets it
    go again and the slot keeps it."""
    _bare, ws, orch, _c, s = parts
    c = SyncContext(ws, load_config(ws.root).git, inbox=Inbox(ws, 0))
    push_mp(orch, "# MP-8.1 Waiting\n\n```bash\ntrue\n```\n")
    pull.integrate(c, s, pull.ls_remote(c, s), "")
    (ws.root / "local.txt").write_text("ours\n")
    git(ws.root, "add", "local.txt")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "local result")
    tip = push_mp(orch, "# MP-8.2 Next\n\n```bash\ntrue\n```\n")
    head = s.rev("HEAD")
    (ws.root / ".git" / "index.lock").touch()
    with pytest.raises(SyncError, match="index.lock"):
        pull.integrate(c, s, tip, "")
    assert len(c.inbox.queue) == 0 and s.rev("HEAD") == head
    assert "MP-8.1" in (ws.root / "Claude_Inbox/incoming_microproject.txt").read_text()
