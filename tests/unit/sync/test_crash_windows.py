"""Each window a `kill -9` can leave in the git channel (issue #19), recovered without
losing or re-running an MP: a stale lock under .git/, a commit staged but not made, a run
whose baseline was never recorded."""

from __future__ import annotations

from mp_engine.inbox.mpfile import parse
from mp_engine.pipeline.claim import claim
from mp_engine.sync.local import LocalChannel
from tests.conftest import events, read_state
from tests.gitutil import git, make_engine, push_mp, remote_file, remote_log, sync_tick

COUNTED = "# MP-19.{n} Counted\n\n```bash\nmkdir -p out && echo run >> out/count-{n}.txt\n```\n"


def test_a_stale_head_lock_fails_the_result_commit_once_and_the_next_poll_publishes_it(channel):
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    # The step leaves HEAD.lock behind, as a git killed mid-commit would.
    push_mp(orch, "# MP-19.1 Lock\n\n```bash\nmkdir -p out && echo run >> out/count.txt && touch .git/HEAD.lock\n```\n")
    assert sync_tick(engine).action == "completed"
    failed = [e for e in events(ws, "sync_failed") if e["stage"] == "publish"]
    assert failed and "HEAD.lock" in failed[-1]["error"]
    assert any(e.get("path") == ".git/HEAD.lock" for e in events(ws, "git_recovered"))
    sync_tick(engine)  # the next poll commits the result it could not commit, and pushes it
    assert remote_log(bare).count("MP-19.1: COMPLETED") == 1
    assert remote_file(bare, "out/count.txt") == "run\n"  # the MP ran once
    assert read_state(ws)["last_completed"] == "MP-19.1"


def test_a_commit_staged_but_not_made_is_finished_and_pushed_at_the_next_start(channel):
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    # The result commit fails after `git add` (HEAD.lock is in the way): the index holds the
    # staged result, as after a kill between `git add` and `git commit`.
    push_mp(
        orch, "# MP-19.2 Staged\n\n```bash\nmkdir -p out && echo run >> out/count-2.txt && touch .git/HEAD.lock\n```\n"
    )
    assert sync_tick(engine).action == "completed"
    (ws.root / ".git" / "HEAD.lock").touch()  # ...and the engine died with the lock still there
    staged = git(ws.root, "status", "--porcelain", "--no-renames").splitlines()
    assert "A  out/count-2.txt" in staged and "D  Claude_Inbox/incoming_microproject.txt" in staged
    restarted = make_engine(ws)  # startup: the lock is stale, the staged result is committed
    sync_tick(restarted)
    assert git(ws.root, "diff", "--cached", "--name-only") == ""  # nothing left half-committed
    assert git(ws.root, "rev-parse", "HEAD") == git(bare, "rev-parse", "main")
    assert remote_file(bare, "out/count-2.txt") == "run\n"
    assert remote_log(bare).count("MP-19.2: COMPLETED") == 1


def test_a_staged_deletion_of_the_inbox_file_no_longer_stops_the_start(channel):
    """The report's reproduction (`git reset --soft HEAD~1` after a clean stop) made every
    start exit 1: `git add -- Claude_Inbox/incoming_microproject.txt` of a path gone from
    both the index and the tree."""
    _bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, COUNTED.format(n=4))
    assert sync_tick(engine).action == "completed"
    engine.shutdown()
    git(ws.root, "reset", "--soft", "HEAD~1")
    make_engine(ws)  # raised SyncError before
    assert git(ws.root, "log", "-1", "--format=%s") == "mp-engine: commit protocol files left by a restart"
    assert "Claude_Inbox/incoming_microproject.txt" not in git(ws.root, "ls-files")


def test_a_run_whose_baseline_was_never_recorded_still_pushes_what_the_mp_wrote(channel):
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, COUNTED.format(n=3))
    engine.sync.poll()  # pulled, not yet claimed
    data = ws.inbox_file.read_bytes()
    real = engine.ctx.channel
    engine.ctx.channel = LocalChannel()  # RUNNING is written; the engine dies before running()
    claim(engine.ctx, parse(data), data, "shell")
    engine.ctx.channel = real
    restarted = make_engine(ws)
    assert sync_tick(restarted).action == "completed"
    assert remote_file(bare, "out/count-3.txt") == "run\n"
    assert any(e["what"] == "baseline derived from the run's ledger" for e in events(ws, "git_recovered"))
    assert remote_log(bare).count("MP-19.3: COMPLETED") == 1


def test_a_result_committed_twice_after_a_crash_takes_nothing_of_the_operators(channel):
    """Killed after the result commit but before its unpublished entry was cleared: the
    retry finds the result in HEAD and derives no baseline, so an edit the operator made
    after the run stays local."""
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, COUNTED.format(n=6))
    assert sync_tick(engine).action == "completed"
    run_id = read_state(ws)["last_result"]["run_id"]
    (ws.root / "operator.txt").write_text("edited after the run\n")
    data = engine.sync.sync.store.load()
    data["unpublished"] = [{"run_id": run_id, "message": "MP-19.6: COMPLETED"}]
    engine.sync.sync.store.save(data)
    sync_tick(engine)
    assert remote_file(bare, "operator.txt") is None
    assert not any(e.get("run") == run_id for e in events(ws, "git_recovered"))


def test_an_mp_that_git_puts_back_after_it_ran_is_not_run_again(channel):
    """A failed result commit left the inbox deletion uncommitted; a git operation then put
    the processed file back (as a failed autostash or a half-applied merge does). The same
    arrival is dropped, and its removal committed; a re-send of the same bytes later runs."""
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    text = "# MP-19.7 Once\n\n```bash\nmkdir -p out && echo run >> out/count-7.txt && touch .git/HEAD.lock\n```\n"
    push_mp(orch, text)
    assert sync_tick(engine).action == "completed"
    # A git operation resets the path to HEAD (an autostash that is not popped, a merge
    # that updated the tree but not HEAD): the processed MP is back, in index and tree.
    git(ws.root, "checkout", "HEAD", "--", "Claude_Inbox/incoming_microproject.txt")
    engine.inbox.note_complete()  # what the watcher says when git writes the file
    result = sync_tick(engine)
    assert result.action == "idle" and "already ran" in result.detail
    assert (ws.root / "out/count-7.txt").read_text() == "run\n" and not ws.inbox_file.exists()
    assert events(ws, "inbox_duplicate_dropped")[-1]["mp"] == "MP-19.7"
    assert remote_file(bare, "Claude_Inbox/incoming_microproject.txt") is None  # the removal travelled
    # The orchestrator sends the very same bytes again: a new arrival, so it runs.
    push_mp(orch, text)
    assert sync_tick(engine).action == "completed"
    assert (ws.root / "out/count-7.txt").read_text() == "run\nrun\n"
