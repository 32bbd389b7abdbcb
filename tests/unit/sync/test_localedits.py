"""Moving the branch to its replayed tip with an operator's uncommitted edits in the way
(sync/localedits.py, issue #45): carried over when they merge, otherwise nothing touched."""

from __future__ import annotations

import os

import mp_engine.sync.pull as pull
from mp_engine.core.atomic import atomic_write
from tests.conftest import events
from tests.gitutil import git, push_file


def local_commit(ws, rel: str, text: str, message: str) -> None:
    (ws.root / rel).write_text(text)
    git(ws.root, "add", rel)
    git(ws.root, "-c", "user.name=engine", "-c", "user.email=e@e", "commit", "-qm", message)


def edited_while_the_remote_changed(parts, mine: str, theirs: str) -> str:
    """shared.txt is on both sides; the engine has an unpushed result, the operator an
    uncommitted edit of shared.txt, and the remote changed it too. Returns the remote tip."""
    _bare, ws, orch, c, s = parts
    push_file(orch, "shared.txt", "one\ntwo\nthree\n", "shared")
    pull.integrate(c, s, pull.ls_remote(c, s), "")
    local_commit(ws, "mine.txt", "x\n", "MP-1.1: COMPLETED")
    (ws.root / "shared.txt").write_text(mine)  # not committed
    return push_file(orch, "shared.txt", theirs, "theirs")


def test_an_edit_in_a_path_the_remote_changed_is_carried_over_and_the_state_file_left_alone(parts):
    _bare, ws, _orch, c, s = parts
    tip = edited_while_the_remote_changed(parts, "ONE\ntwo\nthree\n", "one\ntwo\nTHREE\n")
    state = ws.root / "SESSION_STATE.json"
    atomic_write(state, state.read_text() + " ")  # the engine's write since its last commit
    before = (os.stat(state).st_ino, state.read_bytes())
    assert pull.integrate(c, s, tip, "").integrated
    assert (ws.root / "shared.txt").read_text() == "ONE\ntwo\nTHREE\n"
    assert (os.stat(state).st_ino, state.read_bytes()) == before  # never stashed, never checked out
    assert events(ws, "sync_local_edits_carried")[-1]["paths"] == ["shared.txt"]
    assert s.is_ancestor(tip, "HEAD") and git(ws.root, "stash", "list") == ""


def test_an_edit_that_would_conflict_is_reported_and_nothing_is_touched(parts):
    _bare, ws, _orch, c, s = parts
    tip = edited_while_the_remote_changed(parts, "one\ntwo\nMINE\n", "one\ntwo\nTHEIRS\n")
    head = s.rev("HEAD")
    out = pull.integrate(c, s, tip, "")
    assert out.problem is not None and out.problem.kind == "git_conflict"
    assert "shared.txt" in out.problem.diagnosis and "commit or set aside the uncommitted edits" in out.problem.fix
    assert s.rev("HEAD") == head and (ws.root / "shared.txt").read_text() == "one\ntwo\nMINE\n"
    assert git(ws.root, "stash", "list") == "" and not events(ws, "sync_failed")


def test_an_untracked_file_where_the_remote_adds_one_is_reported_and_left(parts):
    _bare, ws, orch, c, s = parts
    local_commit(ws, "mine.txt", "x\n", "MP-1.1: COMPLETED")
    (ws.root / "new.txt").write_text("the operator's\n")
    tip = push_file(orch, "new.txt", "the orchestrator's\n", "adds new.txt")
    out = pull.integrate(c, s, tip, "")
    assert out.problem is not None and "new.txt" in out.problem.diagnosis
    assert (ws.root / "new.txt").read_text() == "the operator's\n" and git(ws.root, "stash", "list") == ""


def test_a_fast_forward_with_an_edit_in_the_way_carries_it_and_leaves_the_state_file_alone(parts):
    """Issue #45 (the soak): a fast-forward that met a local change fell back to `git merge
    --autostash`, which stashed every dirty file: SESSION_STATE.json was removed and written
    back in place, and a reader found it missing or empty (docs/PROTOCOL.md §5)."""
    _bare, ws, orch, c, s = parts
    push_file(orch, "shared.txt", "one\ntwo\nthree\n", "shared")
    pull.integrate(c, s, pull.ls_remote(c, s), "")
    (ws.root / "shared.txt").write_text("ONE\ntwo\nthree\n")  # the operator's, not committed
    tip = push_file(orch, "shared.txt", "one\ntwo\nTHREE\n", "theirs")
    state = ws.root / "SESSION_STATE.json"
    atomic_write(state, state.read_text() + " ")  # the engine's write since its last commit
    before = (os.stat(state).st_ctime_ns, state.read_bytes())  # ctime: any write, even to a reused inode
    assert pull.integrate(c, s, tip, "").integrated
    assert (ws.root / "shared.txt").read_text() == "ONE\ntwo\nTHREE\n" and s.rev("HEAD") == tip
    assert (os.stat(state).st_ctime_ns, state.read_bytes()) == before  # never stashed, never checked out
    assert events(ws, "sync_local_edits_carried")[-1]["paths"] == ["shared.txt"]
    assert git(ws.root, "stash", "list") == ""


def test_what_a_move_cut_short_left_in_the_tree_does_not_stop_the_next_one(parts):
    """A fast-forward cut short by a full disk wrote the incoming file into the working tree
    but not the index: an untracked copy of exactly what the next move brings. It was in
    the way of every later pull (`untracked working tree files would be overwritten`)."""
    _bare, ws, orch, c, s = parts
    tip = push_file(orch, "Claude_Inbox/incoming_microproject.txt", "# MP-1.2 Next\n\n```bash\ntrue\n```\n", "send")
    (ws.root / "Claude_Inbox/incoming_microproject.txt").write_text("# MP-1.2 Next\n\n```bash\ntrue\n```\n")
    assert pull.integrate(c, s, tip, "").integrated and s.rev("HEAD") == tip
    assert git(ws.root, "status", "--porcelain", "--", "Claude_Inbox") == ""
    (ws.root / "other.txt").write_text("the operator's\n")  # an untracked file of other bytes stays in the way
    tip = push_file(orch, "other.txt", "the orchestrator's\n", "adds other.txt")
    assert pull.integrate(c, s, tip, "").problem is not None


def test_an_edit_that_is_an_incoming_version_a_cut_short_move_left_is_put_back_not_a_conflict(parts):
    """The slot held MP-1.2 (committed); a move cut short wrote MP-1.3 over it; meanwhile the
    orchestrator sent MP-1.4. Merging that edit over MP-1.4 would conflict, but it is no
    one's edit: git's own copy of an incoming version. Before, the MP halted (git_conflict)."""
    _bare, ws, orch, c, s = parts
    inbox = "Claude_Inbox/incoming_microproject.txt"
    pull.integrate(c, s, push_file(orch, inbox, "# MP-1.2 A\n\n```bash\ntrue\n```\n", "send 1.2"), "")
    push_file(orch, inbox, "# MP-1.3 B\n\n```bash\ntrue\n```\n", "send 1.3")
    (ws.root / inbox).write_text("# MP-1.3 B\n\n```bash\ntrue\n```\n")  # the cut-short move's copy
    tip = push_file(orch, inbox, "# MP-1.4 C\n\n```bash\ntrue\n```\n", "send 1.4")
    out = pull.integrate(c, s, tip, "")
    assert out.integrated and out.problem is None and s.rev("HEAD") == tip
    assert (ws.root / inbox).read_text().startswith("# MP-1.4") and git(ws.root, "stash", "list") == ""
    assert events(ws, "git_recovered")[-1]["paths"] == [inbox]
