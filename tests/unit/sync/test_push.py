"""Pushing to a real bare remote: accepted, rejected (retried), refused by a hook (kept)."""

from __future__ import annotations

import pytest

import mp_engine.sync.push as push
from mp_engine.core.errors import SyncError
from mp_engine.sync.context import PROCESSED_REF
from mp_engine.sync.pull import SyncOutcome
from mp_engine.sync.push import PushRejected, push_checked, unpushed
from tests.conftest import events
from tests.gitutil import git, push_file

RETRY = 30.0  # [git] refused_retry's default


def local_commit(ws, name: str = "result.txt") -> str:
    (ws.root / name).write_text("a result\n")
    git(ws.root, "add", name)
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"add {name}")
    return git(ws.root, "rev-parse", "HEAD")


def test_a_push_moves_the_remote_the_tracking_ref_and_the_processed_marker(parts):
    bare, ws, _orch, c, s = parts
    head = local_commit(ws)
    assert unpushed(c, s) == 1
    push.push(c, s, SyncOutcome(), "")
    assert git(bare, "rev-parse", "main") == head == s.rev(c.tracking) == s.rev(PROCESSED_REF)
    assert unpushed(c, s) == 0 and events(ws, "sync_pushed")[-1]["head"] == head[:12]


def test_a_rejected_push_is_rebased_onto_the_orchestrators_commit_and_retried(parts):
    bare, ws, orch, c, s = parts
    local_commit(ws)
    theirs = push_file(orch, "note.txt", "theirs\n", "pushed meanwhile")
    with pytest.raises(PushRejected):
        push_checked(s, c.remote_name, c.cfg.branch, 30)
    out = SyncOutcome()
    push.push(c, s, out, "")
    assert out.integrated and out.problem is None
    assert git(bare, "merge-base", "--is-ancestor", theirs, "main", check=False) == ""
    assert git(bare, "log", "-1", "--format=%s", "main") == "add result.txt"


def test_a_hook_that_refuses_the_push_keeps_the_commit_local_and_says_why(parts):
    bare, ws, _orch, c, s = parts
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refused: files over 100 MB' >&2\nexit 1\n")
    hook.chmod(0o755)
    head = local_commit(ws)
    with pytest.raises(SyncError, match="pre-receive hook declined|check the remote's hooks") as e:
        push_checked(s, c.remote_name, c.cfg.branch, 30)
    assert not isinstance(e.value, PushRejected)
    assert git(bare, "rev-parse", "main") != head and s.rev("HEAD") == head


def test_nothing_to_push_spawns_no_push(parts):
    _bare, ws, _orch, c, s = parts
    before = len(events(ws, "sync_pushed"))  # `init --remote` pushed the layout
    push.push(c, s, SyncOutcome(), "")
    assert len(events(ws, "sync_pushed")) == before


def test_a_blocked_channel_does_not_push(parts):
    bare, ws, _orch, c, s = parts
    local_commit(ws)
    c.store.save({**c.store.load(), "blocked": {"kind": "conflict", "remote": "x", "paths": ["a"]}})
    push.push(c, s, SyncOutcome(), "")
    assert git(bare, "rev-parse", "main") != s.rev("HEAD")


def test_a_refused_push_is_tried_again_after_a_while_without_waiting_for_the_remote_to_move(parts):
    """Issue #45 (the soak): a hook that declines for a while (a quota, a maintenance window)
    left the results local for good while an orchestrator waited for them without pushing:
    only a move of the remote or a restart tried again. Now a refusal is tried again after
    `[git] refused_retry` seconds, doubling, and the channel is unblocked when it goes through."""
    bare, ws, _orch, c, s = parts
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'refused: the quota is used up' >&2\nexit 1\n")
    hook.chmod(0o755)
    head = local_commit(ws)
    push.push(c, s, SyncOutcome(), "")
    blocked = c.store.blocked()
    assert blocked["kind"] == "push_refused" and "quota" in blocked["message"]
    hook.unlink()  # the remote takes pushes again; nobody pushes to it
    push.push(c, s, SyncOutcome(), "")
    assert git(bare, "rev-parse", "main") != head  # not at once: a refusal for good is not hammered
    c.store.save({**c.store.load(), "blocked": {**blocked, "at": blocked["at"] - RETRY - 1}})
    push.push(c, s, SyncOutcome(), "")
    assert git(bare, "rev-parse", "main") == head and c.store.blocked() is None
    assert events(ws, "sync_unblocked")[-1]["reason"] == "the refused push was tried again and went through"


def test_a_push_refused_again_waits_twice_as_long(parts):
    bare, ws, _orch, c, s = parts
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    local_commit(ws)
    push.push(c, s, SyncOutcome(), "")
    first = c.store.blocked()
    c.store.save({**c.store.load(), "blocked": {**first, "at": first["at"] - RETRY - 1}})
    push.push(c, s, SyncOutcome(), "")  # due: tried, refused again
    again = c.store.blocked()
    assert again["tries"] == first["tries"] + 1 and again["at"] > first["at"] - 1
    assert not push.retry_due(again, again["at"] + RETRY + 1)
    assert push.retry_due(again, again["at"] + 2 * RETRY + 1)
    assert not push.retry_due({**again, "kind": "conflict"}, again["at"] + 10**6)  # only refusals
    assert push.retry_due(again, again["at"] + 4.5, first=2.0) and not push.retry_due(
        again, again["at"] + 3.5, first=2.0
    )
    assert c.cfg.refused_retry == RETRY
