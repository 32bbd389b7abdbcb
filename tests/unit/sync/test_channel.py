"""The git channel, driven through `Engine.tick()` against a real bare remote over file://."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from mp_engine.commands.status import render_status
from mp_engine.config.load import load_config
from mp_engine.sync.channel import GitChannel
from mp_engine.views.status import status_report
from tests.conftest import events, read_state
from tests.gitutil import (
    FAILING,
    HELLO,
    engine_workspace,
    git,
    make_engine,
    make_remote,
    push_file,
    push_mp,
    remote_file,
    remote_log,
    sync_tick,
)


def unpushed(ws) -> int:
    return GitChannel(ws, load_config(ws.root).git).report()["unpushed"]


def test_init_remote_clones_and_pushes_the_layout(tmp_path):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}")
    assert git(ws.root, "remote", "get-url", "origin") == f"file://{bare}"
    assert remote_log(bare) == ["mp-engine: workspace layout"]
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["current"] == "IDLE"
    cfg = load_config(ws.root).git
    assert cfg.enabled and cfg.remote == "origin" and cfg.branch == "main"
    # A second clone of the same remote: `init --remote` into an empty directory clones it.
    ws2 = engine_workspace(tmp_path, f"file://{bare}", name="second")
    assert (ws2.root / "SESSION_STATE.json").exists() and remote_log(bare) == ["mp-engine: workspace layout"]


def test_pulled_mp_runs_and_the_result_is_pushed(channel):
    bare, _url, ws, orch = channel
    (ws.root / "scratch.txt").write_text("local, unrelated, must not be committed\n")
    push_mp(orch, HELLO)
    engine = make_engine(ws)
    result = sync_tick(engine)
    assert result.action == "completed", result
    log = remote_log(bare)
    assert log[:2] == ["MP-0.1: COMPLETED", "MP-0.1: RUNNING"]
    state = json.loads(remote_file(bare, "SESSION_STATE.json"))
    assert state["status"] == "ONLINE" and state["last_completed"] == "MP-0.1"
    assert remote_file(bare, "Claude_Inbox/incoming_microproject.txt") is None
    assert remote_file(bare, "hello/greeting.txt") == "Hello from mp-engine.\n"  # what the MP changed
    assert remote_file(bare, "scratch.txt") is None  # never `git add -A`
    assert "Status: COMPLETED" in remote_file(bare, "SYSTEM/RESULT_last.md")
    # The RUNNING commit carried the RUNNING state.
    running = git(bare, "show", "main~1:SESSION_STATE.json")
    assert json.loads(running)["status"] == "RUNNING"
    assert unpushed(ws) == 0


def test_error_result_commit_message_names_the_failure_and_approves_lifts_it(channel):
    bare, _url, ws, orch = channel
    push_mp(orch, FAILING)
    engine = make_engine(ws)
    assert sync_tick(engine).action == "error"
    assert remote_log(bare)[0].startswith("MP-0.2: ERROR (")
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["status"] == "ERROR"
    push_mp(orch, "# MP-0.3 Fixed\nApproves: MP-0.2\n\n```bash\necho fixed\n```\n")
    assert sync_tick(engine).action == "completed"
    assert remote_log(bare)[0] == "MP-0.3: COMPLETED"


def test_push_race_orchestrator_commit_during_the_run_survives(channel):
    bare, _url, ws, orch = channel
    mp = (
        "# MP-0.4 Race\n\n```bash\n"
        f"cd {orch} && git pull -q --ff-only && echo race > race.txt && git add race.txt "
        "&& git commit -qm 'orchestrator commit during the run' && git push -q origin HEAD:main\n"
        "```\n\n```file mine.txt\nfrom the MP\n```\n"
    )
    push_mp(orch, mp)
    engine = make_engine(ws)
    assert sync_tick(engine).action == "completed"
    log = remote_log(bare)
    assert log[0] == "MP-0.4: COMPLETED" and "orchestrator commit during the run" in log
    assert remote_file(bare, "race.txt") == "race\n" and remote_file(bare, "mine.txt") == "from the MP\n"
    assert events(ws, "sync_pulled")[-1]["how"] == "rebase"
    assert unpushed(ws) == 0


def test_unrebaseable_conflict_aborts_leaves_a_clean_tree_and_ends_in_error(channel):
    bare, _url, ws, orch = channel
    mp = (
        "# MP-0.5 Conflict\n\n```file notes.txt\nengine version\n```\n\n```bash\n"
        f"cd {orch} && git pull -q --ff-only && echo orchestrator version > notes.txt && git add notes.txt "
        "&& git commit -qm 'orchestrator edits notes.txt' && git push -q origin HEAD:main\n```\n"
    )
    push_mp(orch, mp)
    engine = make_engine(ws)
    result = sync_tick(engine)
    assert result.action == "error"
    assert git(ws.root, "status", "--porcelain", "--untracked-files=no") == ""
    assert not (ws.root / ".git" / "rebase-merge").exists()
    state = read_state(ws)
    assert state["status"] == "ERROR" and state["halt"]
    text = ws.result_file.read_text()
    assert "git_conflict" in text and "notes.txt" in text and "Proposed fix:" in text
    # Nothing lost: the engine's commits are local and on the side branch; the remote keeps
    # the orchestrator's version.
    assert remote_file(bare, "notes.txt") == "orchestrator version\n"
    assert remote_file(bare, "notes.txt", ref="mp-engine/blocked/main") == "engine version\n"
    assert git(ws.root, "log", "--format=%s", "-3").splitlines()[1] == "MP-0.5: COMPLETED"
    assert unpushed(ws) >= 2
    # The orchestrator takes the fix (reverts its change); the engine rebases and pushes.
    git(orch, "revert", "--no-edit", "HEAD")
    git(orch, "push", "-q", "origin", "HEAD:main")
    sync_tick(engine)
    assert unpushed(ws) == 0 and remote_file(bare, "notes.txt") == "engine version\n"
    assert events(ws, "sync_unblocked")


def test_unreachable_remote_keeps_results_local_and_pushes_them_later(channel, tmp_path):
    bare, _url, ws, orch = channel
    push_mp(orch, HELLO)
    engine = make_engine(ws)
    engine.inbox.settle = 0  # the MP is pulled now, the remote leaves before it runs
    sync_tick(engine)  # pulls, runs and pushes MP-0.1
    push_mp(orch, HELLO.replace("MP-0.1", "MP-0.6"))
    assert engine.sync is not None
    engine.sync._next_poll = 0.0
    away = tmp_path / "away.git"
    # Pull MP-0.6 with a poll, then take the remote away before it runs.
    with engine.lock.hold("test"):
        engine.sync.poll()
    bare.rename(away)
    engine.sync._next_poll = float("inf")
    assert engine.tick().action == "completed"
    assert events(ws, "sync_unreachable")
    assert unpushed(ws) == 2  # RUNNING and COMPLETED of MP-0.6
    assert "2 unpushed commit(s)" in render_status(status_report(ws, load_config(ws.root)))
    away.rename(bare)
    sync_tick(engine)
    assert unpushed(ws) == 0 and remote_log(bare)[0] == "MP-0.6: COMPLETED"
    assert events(ws, "sync_reachable")


def test_force_push_rewriting_processed_history_is_refused(channel, tmp_path):
    bare, url, ws, orch = channel
    push_mp(orch, HELLO)
    engine = make_engine(ws)
    assert sync_tick(engine).action == "completed"
    # The orchestrator rewrites history: a new root commit with an MP, force-pushed.
    rogue = tmp_path / "rogue"
    rogue.mkdir()
    git(rogue, "init", "-q", "-b", "main")
    (rogue / "Claude_Inbox").mkdir()
    (rogue / "Claude_Inbox" / "incoming_microproject.txt").write_text(
        "# MP-6.6 Evil\n\n```bash\ntouch /tmp/pwned\n```\n"
    )
    git(rogue, "add", "-A")
    git(rogue, "commit", "-qm", "rewritten")
    git(rogue, "push", "-q", "--force", url, "HEAD:main")
    result = sync_tick(engine)
    assert result.action == "error"
    assert not ws.inbox_file.exists()  # nothing from the rewritten history was pulled
    assert "history_rewritten" in ws.result_file.read_text()
    assert read_state(ws)["status"] == "ERROR"
    assert events(ws, "sync_refused")


def test_startup_recovers_a_stale_index_lock_and_a_half_finished_rebase(channel):
    _bare, _url, ws, orch = channel
    gitdir = ws.root / ".git"
    # A half-finished rebase, as a crash in the middle of rebasing local results leaves it.
    (ws.root / "f.txt").write_text("base\n")
    git(ws.root, "add", "f.txt")
    git(ws.root, "commit", "-qm", "base")
    git(ws.root, "checkout", "-q", "-b", "upstream")
    (ws.root / "f.txt").write_text("upstream\n")
    git(ws.root, "commit", "-qam", "upstream")
    git(ws.root, "checkout", "-q", "main")
    (ws.root / "f.txt").write_text("local\n")
    git(ws.root, "commit", "-qam", "local result")
    git(ws.root, "rebase", "upstream", check=False)
    assert (gitdir / "rebase-merge").exists() or (gitdir / "rebase-apply").exists()
    (gitdir / "index.lock").write_text("")
    engine = make_engine(ws)  # start() recovers
    recovered = [(e["what"], e.get("path")) for e in events(ws, "git_recovered")]
    assert ("stale lock removed", ".git/index.lock") in recovered
    assert ("half-finished rebase aborted", None) in recovered
    assert not (gitdir / "index.lock").exists() and not (gitdir / "rebase-merge").exists()
    assert git(ws.root, "symbolic-ref", "--short", "HEAD") == "main"  # back where it was
    assert (ws.root / "f.txt").read_text() == "local\n"
    del engine


def test_every_git_call_is_non_interactive(channel, tmp_path, monkeypatch):
    _bare, _url, ws, _orch = channel
    # A remote that would ask for a password: an https URL nobody answers. With
    # GIT_TERMINAL_PROMPT=0 and no askpass the call fails at once instead of hanging.
    git(ws.root, "remote", "set-url", "origin", "https://127.0.0.1:9/none.git")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "1")  # the engine must override it
    engine = make_engine(ws)
    sync_tick(engine)
    assert events(ws, "sync_unreachable")


def _git_children() -> list[int]:
    return [c.pid for c in psutil.Process().children() if "git" in c.name()]


def test_300_cycles_leave_no_git_processes_or_file_descriptors(channel):
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    assert engine.sync is not None
    sync_tick(engine)  # warm up imports and caches
    fds_before = psutil.Process().num_fds()
    for i in range(300):
        if i % 50 == 0:  # the remote moves now and then: fetch, merge and push paths run too
            push_file(orch, f"notes/{i}.txt", f"{i}\n", f"note {i}")
        sync_tick(engine)
    assert _git_children() == []
    assert psutil.Process().num_fds() <= fds_before
    assert remote_file(bare, "notes/250.txt") == "250\n" and (ws.root / "notes" / "250.txt").exists()


def test_allowed_signers_inside_the_repository_is_a_config_error(tmp_path):
    from mp_engine.core.errors import ConfigError

    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, f"file://{bare}")
    (ws.root / "signers").write_text("")
    cfg = load_config(
        ws.root, {"MP_ENGINE_GIT__REQUIRE_SIGNED": "true", "MP_ENGINE_GIT__ALLOWED_SIGNERS": str(ws.root / "signers")}
    )
    with pytest.raises(ConfigError, match="inside the workspace"):
        GitChannel(ws, cfg.git)


def test_status_reports_unpushed_commits(channel):
    _bare, _url, ws, _orch = channel
    report = status_report(ws, load_config(ws.root))
    assert report["git"]["unpushed"] == 0
    git(ws.root, "commit", "-q", "--allow-empty", "-m", "local only")
    assert "1 unpushed commit(s)" in render_status(status_report(ws, load_config(ws.root)))


def test_what_the_mp_changed_travels_and_the_operators_local_changes_stay(channel):
    """Attribution without a full-tree scan before the run: a path travels when the MP
    changed it (its ctime is after the run started, and for a path dirty before the run its
    content differs too); the operator's untouched edits and staged files stay local."""
    bare, _url, ws, orch = channel
    push_file(orch, "tracked/keep.txt", "keep\n", "seed keep")
    push_file(orch, "tracked/edit.txt", "v1\n", "seed edit")
    push_file(orch, "tracked/gone.txt", "bye\n", "seed gone")
    push_file(orch, "tracked/dirty.txt", "committed\n", "seed dirty")
    push_file(orch, "tracked/touched.txt", "committed\n", "seed touched")
    engine = make_engine(ws)
    assert sync_tick(engine).action in ("idle", "pulled", "waiting"), "the seeds are pulled first"
    # The operator's local state before the MP arrives:
    (ws.root / "tracked/dirty.txt").write_text("operator edit\n")  # dirty, the MP leaves it alone
    (ws.root / "tracked/touched.txt").write_text("operator edit\n")  # dirty; MP-4.2 rewrites it as is
    (ws.root / "notes.txt").write_text("operator notes\n")  # untracked
    (ws.root / "staged.txt").write_text("staged by the operator\n")
    git(ws.root, "add", "staged.txt")
    mp = (
        "# MP-4.1 Change files\n\n```bash\n"
        "echo v2 > tracked/edit.txt\n"
        "rm tracked/gone.txt\n"
        "mkdir -p newdir/sub && echo new > newdir/sub/new.txt\n"
        "```\n"
    )
    push_mp(orch, mp)
    assert sync_tick(engine).action == "completed"
    assert remote_log(bare)[:2] == ["MP-4.1: COMPLETED", "MP-4.1: RUNNING"]
    assert remote_file(bare, "tracked/edit.txt") == "v2\n"
    assert remote_file(bare, "tracked/gone.txt") is None
    assert remote_file(bare, "newdir/sub/new.txt") == "new\n"
    assert remote_file(bare, "tracked/keep.txt") == "keep\n"
    # The operator's changes did not travel, in neither commit, and are still there locally.
    for ref in ("main", "main~1"):
        assert remote_file(bare, "tracked/dirty.txt", ref) == "committed\n"
        assert remote_file(bare, "tracked/touched.txt", ref) == "committed\n"
        assert remote_file(bare, "notes.txt", ref) is None
        assert remote_file(bare, "staged.txt", ref) is None
    status = git(ws.root, "status", "--porcelain", "--untracked-files=all")
    assert " M tracked/dirty.txt" in status and " M tracked/touched.txt" in status
    assert "?? notes.txt" in status and "A  staged.txt" in status
    # The next MP edits one dirty file and rewrites the other with the bytes it had: the edit
    # is the MP's change and travels; the rewrite changed nothing, so the operator's edit stays.
    push_mp(
        orch,
        "# MP-4.2 Edit the dirty file\n\n```bash\necho by the mp > tracked/dirty.txt\n"
        't=$(cat tracked/touched.txt) && echo "$t" > tracked/touched.txt\n```\n',
    )
    assert sync_tick(engine).action == "completed"
    assert remote_file(bare, "tracked/dirty.txt") == "by the mp\n"
    assert remote_file(bare, "tracked/touched.txt") == "committed\n"
    assert (ws.root / "tracked/touched.txt").read_text() == "operator edit\n"
    assert remote_file(bare, "staged.txt") is None and remote_file(bare, "notes.txt") is None


def _git_commands(trace: Path) -> list[str]:
    """The git commands a GIT_TRACE2_EVENT file recorded (top-level processes only)."""
    out = []
    for line in trace.read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "start" and "/" not in e["sid"]:
            argv = e["argv"][1:]
            while argv[:1] in (["-c"], ["--literal-pathspecs"]):  # global options
                argv = argv[2:] if argv[0] == "-c" else argv[1:]
            out.append(" ".join(argv[:2]))
    return out


def test_steady_state_mp_spawns_only_batched_bookkeeping_git_and_a_staged_file_still_stays_local(
    channel, monkeypatch, tmp_path
):
    """A trivial MP costs the git commands the protocol needs, plus one `git update-ref
    --stdin` per sync point (the refs are set by git, never written by hand) and one
    `git diff --cached` per commit (what is staged is asked of git, not read from the
    index's bytes). A staged file of the operator's stays out of both commits."""
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, HELLO)
    assert sync_tick(engine).action == "completed"
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    push_mp(orch, "# MP-0.2 Trivial\n\n```bash\ntrue\n```\n")
    trace.unlink(missing_ok=True)
    assert sync_tick(engine).action == "completed"
    commands = _git_commands(trace)
    protocol = ["ls-remote", "fetch", "merge", "add", "commit", "push", "status", "add", "commit", "push"]
    # One ref transaction per sync point (pull, RUNNING push, result push); what is staged
    # is asked once, for the RUNNING commit (the result commit reads it from `git status`);
    # one `git log` per pull lists the MP versions it brings (history is the queue).
    bookkeeping = ["update-ref", "update-ref", "update-ref", "diff", "log"]
    assert sorted(c.split()[0] for c in commands) == sorted(protocol + bookkeeping), commands
    assert all(c == "update-ref --stdin" for c in commands if c.startswith("update-ref")), commands
    assert not [c for c in commands if c.split()[0] in ("merge-base", "rev-parse", "cat-file")], commands
    assert git(bare, "rev-parse", "main") == git(ws.root, "rev-parse", "refs/mp-engine/processed")
    assert git(ws.root, "rev-parse", "refs/remotes/origin/main") == git(ws.root, "rev-parse", "HEAD")
    git(ws.root, "fsck", "--no-progress")

    (ws.root / "staged.txt").write_text("staged by the operator\n")
    git(ws.root, "add", "staged.txt")
    push_mp(orch, "# MP-0.3 Trivial\n\n```bash\ntrue\n```\n")
    trace.unlink(missing_ok=True)
    assert sync_tick(engine).action == "completed"
    assert "diff --cached" in _git_commands(trace)
    for ref in ("main", "main~1"):
        assert remote_file(bare, "staged.txt", ref) is None
    assert remote_log(bare)[:2] == ["MP-0.3: COMPLETED", "MP-0.3: RUNNING"]
    assert "A  staged.txt" in git(ws.root, "status", "--porcelain")


def test_a_ref_locked_by_another_git_is_reported_not_overwritten(channel):
    _bare, _url, ws, _orch = channel
    from mp_engine.core.errors import SyncError
    from mp_engine.sync.session import GitSession

    head = git(ws.root, "rev-parse", "HEAD")
    ref = "refs/mp-engine/test"
    lock = ws.root / ".git" / "refs" / "mp-engine" / "test.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("held by another git\n")
    s = GitSession(ws.root, 30)
    try:
        with pytest.raises(SyncError, match="test.lock"):
            s.update_refs({ref: head})
        lock.unlink()
        s.update_refs({ref: head})
        assert git(ws.root, "rev-parse", ref) == head
        with pytest.raises(SyncError, match="not a ref"):
            s.update_refs({ref: "HEAD\nupdate refs/heads/main 0000"})
        # A reftable repository (git 2.45+, not installable here): refs are read by git too.
        s.reftable = True
        git(ws.root, "commit", "-q", "--allow-empty", "-m", "another")
        newer = git(ws.root, "rev-parse", "HEAD")
        s.update_refs({ref: newer})
        assert s.rev(ref) == newer == git(ws.root, "rev-parse", ref)
        with pytest.raises(SyncError, match="not a ref"):
            s.update_refs({ref: "HEAD\nupdate refs/heads/main 0000"})
    finally:
        s.close()


def test_refs_are_read_like_git_reads_them(channel):
    """`GitSession.rev` reads refs through GitPython; it must agree with `git rev-parse`: packed
    refs, a loose ref shadowing its packed line, symbolic refs, expressions and misses."""
    _bare, _url, ws, orch = channel
    from mp_engine.sync.session import GitSession

    push_mp(orch, HELLO)
    assert sync_tick(make_engine(ws)).action == "completed"
    git(ws.root, "pack-refs", "--all")
    git(ws.root, "update-ref", "refs/heads/side", "HEAD~1")  # loose, shadows nothing
    git(ws.root, "symbolic-ref", "refs/heads/alias", "refs/heads/side")
    s = GitSession(ws.root, 30)
    try:
        for name in ("HEAD", "refs/heads/main", "refs/remotes/origin/main", "refs/heads/side", "refs/heads/alias"):
            assert s.rev(name) == git(ws.root, "rev-parse", name), name
        git(ws.root, "update-ref", "refs/heads/main", "HEAD~1")  # a loose file over the packed line
        assert s.rev("refs/heads/main") == s.rev("HEAD") == git(ws.root, "rev-parse", "HEAD")
        assert s.rev("HEAD~1") == git(ws.root, "rev-parse", "HEAD~1")  # an expression: rev-parse
        assert s.rev("refs/heads/missing") is None and s.rev("refs/../HEAD") is None
    finally:
        s.close()


def test_a_path_that_looks_like_a_pattern_is_staged_as_a_path(channel):
    """Paths reach `git add` and `git commit` as names (on the command line or through the
    pathspec file): an MP creating `*.txt` or `:(glob)x` commits those files and no untracked
    .txt the operator keeps in the workspace."""
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    (ws.root / "notes.txt").write_text("the operator's, untracked\n")
    push_mp(orch, "# MP-7.1 Odd names\n\n```bash\necho star > '*.txt'\necho magic > ':(glob)x'\n```\n")
    assert sync_tick(engine).action == "completed"
    assert remote_file(bare, "*.txt") == "star\n"
    assert remote_file(bare, ":(glob)x") == "magic\n"
    assert remote_file(bare, "notes.txt") is None
    assert "?? notes.txt" in git(ws.root, "status", "--porcelain")


def test_the_event_log_stays_on_the_host_and_each_runs_events_travel_in_its_archive(channel):
    """Committing SYSTEM/events.jsonl made every commit and push grow with the log (a 5 MiB
    log took a trivial MP from 172 to 430 ms). It is ignored now; a run's own events are
    copied into its archive and travel with it."""
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    for n in (1, 2):
        push_mp(orch, f"# MP-8.{n} Trivial\n\n```bash\ntrue\n```\n")
        assert sync_tick(engine).action == "completed"
    assert remote_file(bare, "SYSTEM/events.jsonl") is None
    assert git(bare, "log", "--format=%s", "main", "--", "SYSTEM/events.jsonl") == ""
    assert ws.events_file.exists() and events(ws, "sync_pushed")  # the host keeps its log
    run_id = read_state(ws)["last_result"]["run_id"]
    copy = [json.loads(line) for line in remote_file(bare, f"SYSTEM/runs/{run_id}/events.jsonl").splitlines()]
    names = [e["event"] for e in copy]
    assert names[0] == "state_changed" and "mp_claimed" in names and "mp_completed" in names
    assert "sync_pushed" in names  # the RUNNING push, recorded before the result commit
    assert {e.get("mp") for e in copy if "mp" in e} == {"MP-8.2"}  # only this run's events
    assert git(ws.root, "status", "--porcelain") == ""


def test_a_workspace_that_tracked_the_event_log_stops_tracking_it_at_start(channel):
    """Versions before 0.2 kept the log at SYSTEM/events.jsonl and committed it. The engine
    moves it into SYSTEM/.engine/ (history kept) and commits its removal once, even when
    the removal has to be rebased over an MP the orchestrator pushed meanwhile."""
    bare, _url, ws, orch = channel
    (ws.system_dir / ".gitignore").write_text(
        "# machine-local runtime files of mp-engine (lock, lock owner)\n.engine/\n"
    )
    ws.legacy_events_file.write_text('{"ts": "2026-01-01T00:00:00.000Z", "event": "engine_started"}\n')
    git(ws.root, "add", "-f", "SYSTEM/events.jsonl", "SYSTEM/.gitignore")
    git(ws.root, "commit", "-qm", "old engine commit")
    git(ws.root, "push", "-q", "origin", "HEAD:main")
    push_mp(orch, HELLO)  # on top of the old commit: the engine's removal must be rebased

    engine = make_engine(ws)
    assert sync_tick(engine).action == "completed"
    assert "mp-engine: the event log stays on the host; each run's events travel in its archive" in remote_log(bare)
    assert remote_file(bare, "SYSTEM/events.jsonl") is None
    assert "/events.jsonl" in remote_file(bare, "SYSTEM/.gitignore").split()
    lines = ws.events_file.read_text().splitlines()
    assert json.loads(lines[0])["event"] == "engine_started" and len(lines) > 1  # moved, kept, still written
    assert events(ws, "event_log_moved") and events(ws, "git_recovered")[-1]["what"] == "old event log untracked"
    assert git(ws.root, "status", "--porcelain") == ""


def test_hooks_a_step_plants_in_the_repository_never_run_in_the_engines_git(channel, tmp_path):
    """A step sets core.hooksPath (and an fsmonitor hook) in .git/config: the engine's
    commits and pushes run none of them (issue #20)."""
    bare, _url, ws, orch = channel
    marker = tmp_path / "hook-ran"
    hooks = tmp_path / "evil-hooks"
    hooks.mkdir()
    for name in ("post-commit", "pre-push", "reference-transaction", "pre-commit"):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        (hooks / name).chmod(0o755)
    fsmonitor = tmp_path / "fsmonitor.sh"
    fsmonitor.write_text(f"#!/bin/sh\necho fsmonitor >> {marker}\n")
    fsmonitor.chmod(0o755)
    mp = (
        "# MP-0.9 Plants hooks\n\n```bash\n"
        f"git config core.hooksPath {hooks} && git config core.fsmonitor {fsmonitor}\n"
        "echo work > work.txt\n```\n"
    )
    push_mp(orch, mp)
    engine = make_engine(ws)
    accepted = (ws.root / ".git" / "config").read_bytes()
    assert sync_tick(engine).action == "completed"
    # The engine ran no git after the step changed .git/config: the result stays on the host,
    # the status says why, and nothing the step planted ran.
    assert not marker.exists(), marker.read_text()
    assert remote_log(bare)[0] == "MP-0.9: RUNNING"
    (changed,) = [e for e in events(ws, "git_config_changed")]
    assert "hooksPath" in changed["error"] and "fsmonitor" in changed["error"]
    assert "git is stopped: " in ws.result_file.read_text()
    assert "changed, and not by the engine" in str(engine.sync.report())  # what `status` shows
    sync_tick(engine)
    assert not marker.exists() and remote_log(bare)[0] == "MP-0.9: RUNNING"  # still stopped
    # The operator restores the accepted config: the next poll pushes the result.
    (ws.root / ".git" / "config").write_bytes(accepted)
    sync_tick(engine)
    assert remote_log(bare)[0] == "MP-0.9: COMPLETED" and remote_file(bare, "work.txt") == "work\n"
    assert events(ws, "git_config_restored") and not marker.exists()
