"""Rebasing the engine's unpushed commits without rewriting its own files in the tree:
a reader of SESSION_STATE.json never sees it missing, torn or going backwards (issue #19)."""

from __future__ import annotations

import json
import os
import threading

import pytest

import mp_engine.sync.pull as pull
import mp_engine.sync.session as session
from mp_engine.agent.run.workbranch import WorkBranch
from mp_engine.config.load import load_config
from mp_engine.core.atomic import atomic_write
from mp_engine.pipeline.engine import Engine
from mp_engine.sync.redact import Redactor
from tests.agentutil import ONE, configure, level
from tests.conftest import events, read_state, wait_for
from tests.gitutil import git, make_engine, push_file, push_mp, remote_file, remote_log, sync_tick

INBOX = "Claude_Inbox/incoming_microproject.txt"


def local_commit(ws, rel: str, text: str, message: str) -> None:
    (ws.root / rel).write_text(text)
    git(ws.root, "add", rel)
    git(ws.root, "-c", "user.name=engine", "-c", "user.email=e@e", "commit", "-qm", message)


def test_the_engines_files_are_not_rewritten_and_the_commits_keep_author_and_message(parts):
    _bare, ws, orch, c, s = parts
    state = ws.root / "SESSION_STATE.json"
    local_commit(ws, "SESSION_STATE.json", state.read_text() + " ", "MP-1.0: RUNNING")
    local_commit(ws, "SESSION_STATE.json", state.read_text() + " ", "MP-1.0: COMPLETED")
    before = (os.stat(state).st_ino, state.read_text())
    tip = push_file(orch, "note.txt", "from the orchestrator\n", "a note")
    out = pull.integrate(c, s, tip, "")
    assert out.integrated and events(ws, "sync_pulled")[-1]["how"] == "rebase"
    assert (os.stat(state).st_ino, state.read_text()) == before  # git never touched it
    assert (ws.root / "note.txt").read_text() == "from the orchestrator\n"
    log = git(ws.root, "log", "-3", "--format=%s|%an").splitlines()
    assert log == ["MP-1.0: COMPLETED|engine", "MP-1.0: RUNNING|engine", "a note|mp-engine tests"]
    assert git(ws.root, "merge-base", "--is-ancestor", tip, "HEAD", check=False) == ""
    assert not events(ws, "sync_rebase_fallback")


def test_a_reader_never_sees_the_state_missing_torn_or_backwards_while_mps_rebase(channel):
    """The orchestrator pushes a note while each MP runs, so each result is rebased."""
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    problems: list[str] = []
    stop = threading.Event()
    seen = [0]

    def reader() -> None:
        last = -1
        while not stop.is_set():
            try:
                data = json.loads((ws.root / "SESSION_STATE.json").read_text())
            except FileNotFoundError:
                problems.append("missing")
                continue
            except ValueError as e:
                problems.append(f"torn: {e}")
                continue
            seen[0] += 1
            done = data.get("last_completed") or "MP-0.0"
            n = int(done.split(".")[1]) if done.startswith("MP-20.") else -1
            if n < last:
                problems.append(f"went back from MP-20.{last} to {done}")
            last = max(last, n)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        for n in range(1, 5):
            note = f"cd {orch} && git pull -q --ff-only && echo {n} >> notes.txt && git add notes.txt && git commit -qm note-{n} && git push -q origin HEAD:main"
            push_mp(orch, f"# MP-20.{n} With a note pushed meanwhile\n\n```bash\n{note}\n```\n")
            assert sync_tick(engine).action == "completed"
    finally:
        stop.set()
        t.join(timeout=10)
    assert problems == [] and seen[0] > 0
    assert read_state(ws)["last_completed"] == "MP-20.4"
    sync_tick(engine)
    assert all(f"MP-20.{n}: COMPLETED" in remote_log(bare) for n in range(1, 5))
    assert len([e for e in events(ws, "sync_pulled") if e["how"] == "rebase"]) >= 4


def landed_with_a_merge(
    parts, work: tuple[str, str] = ("out/a.txt", "hello\n"), *, fork_unpushed: bool = False
) -> tuple[str, str]:
    """The soak's history (issue #45): MP-9.1 is in the inbox; its verified work is on
    mp/MP-9.1; a restart's commit moved the channel branch meanwhile, so the work lands with
    the merge commit `MP-9.1: merge mp/MP-9.1`; the result commit clears the inbox. None of
    it is pushed (`fork_unpushed`: nor the RUNNING commit the work branch was made from),
    and the orchestrator has pushed the next MP. Returns (the remote's tip, the work
    branch's tip)."""
    _bare, ws, orch, c, s = parts
    push_mp(orch, "# MP-9.1 The first\n\n```bash\ntrue\n```\n")
    pull.integrate(c, s, pull.ls_remote(c, s), "")
    if fork_unpushed:
        local_commit(ws, "SYSTEM/runs/run-9.txt", "claimed\n", "MP-9.1: RUNNING")
    wb = WorkBranch(ws, "MP-9.1", "run-9")
    (wb.ensure() / work[0]).parent.mkdir(parents=True, exist_ok=True)
    (wb.path / work[0]).write_text(work[1])
    task = wb.commit("MP-9.1 MT-001: the work").sha
    state = ws.root / "SESSION_STATE.json"
    local_commit(ws, "SESSION_STATE.json", state.read_text() + " ", "mp-engine: engine started (RUNNING)")
    assert wb.land("merge", exact=True).how == "merge"
    wb.remove()
    git(ws.root, "rm", "-q", INBOX)
    local_commit(ws, "SESSION_STATE.json", state.read_text() + "  ", "MP-9.1: COMPLETED")
    return push_mp(orch, "# MP-9.2 The next\n\n```bash\ntrue\n```\n"), task


@pytest.mark.parametrize("fork_unpushed", [False, True])
def test_the_engines_own_merge_is_replayed_and_the_next_mp_keeps_the_slot(parts, fork_unpushed):
    """Issue #45: a landing merge in the unpushed range no longer sends the pull to
    `git rebase`, which conflicted on the inbox and halted the engine. Only the channel
    branch's line is replayed: the merge keeps the work branch's commits as they are."""
    _bare, ws, _orch, c, s = parts
    tip, task = landed_with_a_merge(parts, fork_unpushed=fork_unpushed)
    out = pull.integrate(c, s, tip, "")
    assert out.integrated and out.problem is None, out.problem
    assert not events(ws, "sync_rebase_fallback") and not events(ws, "sync_conflict")
    assert "MP-9.2" in (ws.root / INBOX).read_text() and (ws.root / "out/a.txt").read_text() == "hello\n"
    log = git(ws.root, "log", "--first-parent", "--format=%s", f"{tip}..HEAD").splitlines()
    claim = ["MP-9.1: RUNNING"] if fork_unpushed else []
    assert log == ["MP-9.1: COMPLETED", "MP-9.1: merge mp/MP-9.1", "mp-engine: engine started (RUNNING)", *claim]
    assert git(ws.root, "rev-parse", "HEAD~1^2") == task  # the work branch's commits, as they were
    assert s.is_ancestor(tip, "HEAD") and git(ws.root, "status", "--porcelain", "--untracked-files=no") == ""


def test_git_never_rewrites_the_state_file_while_a_merge_is_replayed(parts, monkeypatch):
    """Issue #45, part 2: after every git command of the pull the state file is the same
    file with the same bytes; `git rebase --autostash` replaced it (a reader found it
    missing, or older). The engine wrote it after its last commit, as it often has."""
    _bare, ws, _orch, c, s = parts
    tip, _task = landed_with_a_merge(parts)
    state = ws.root / "SESSION_STATE.json"
    atomic_write(state, state.read_text() + "   ")
    before = (os.stat(state).st_ino, state.read_bytes())
    seen: list[tuple[str, object]] = []
    real = session.git

    def watched(cwd, *args, **kw):
        r = real(cwd, *args, **kw)
        seen.append((args[0], (os.stat(state).st_ino, state.read_bytes()) if state.exists() else "missing"))
        return r

    monkeypatch.setattr(session, "git", watched)
    pull.integrate(c, s, tip, "")
    assert [cmd for cmd, now in seen if now != before] == []


def test_a_local_edit_of_the_config_is_kept_and_never_reported_as_left_by_git(parts):
    """Issue #45, part 2: the host's uncommitted mp-engine.toml edit is its own; the pull
    leaves it as it is and never says the tree was left unclean."""
    _bare, ws, _orch, c, s = parts
    tip, _task = landed_with_a_merge(parts)
    config = ws.root / "mp-engine.toml"
    config.write_text(config.read_text() + "# the operator's note\n")
    assert pull.integrate(c, s, tip, "").integrated
    assert config.read_text().endswith("# the operator's note\n")
    assert not events(ws, "sync_failed")


def test_a_real_conflict_under_a_merge_blocks_without_touching_the_tree(parts):
    """Both the landed work and the orchestrator changed one file: blocked as git_conflict,
    naming it; refs, index and tree as they were (nothing was rebased and aborted)."""
    _bare, ws, orch, c, s = parts
    tip, _task = landed_with_a_merge(parts, work=("shared.txt", "ours\n"))
    tip = push_file(orch, "shared.txt", "theirs\n", "theirs")
    config = ws.root / "mp-engine.toml"
    config.write_text(config.read_text() + "# the operator's note\n")
    head, state = s.rev("HEAD"), (ws.root / "SESSION_STATE.json").read_bytes()
    out = pull.integrate(c, s, tip, "")
    assert out.problem is not None and out.problem.kind == "git_conflict" and "shared.txt" in out.problem.diagnosis
    assert s.rev("HEAD") == head and (ws.root / "SESSION_STATE.json").read_bytes() == state
    assert git(ws.root, "status", "--porcelain", "--untracked-files=no") == "M mp-engine.toml"
    assert not events(ws, "sync_failed") and not events(ws, "sync_rebase_fallback")


def test_the_soaks_scenario_each_mp_gets_one_result_and_the_next_one_runs(channel, tmp_path, monkeypatch):
    """Issue #45 in one process: an agent MP is interrupted (a stop before its first call)
    and the engine restarted, whose commit moves the channel branch; while the agent works,
    the orchestrator pushes the next MP; the verified work lands with a merge commit, and
    the result's push meets the remote's new tip. Each MP gets exactly one result, nothing
    halts, the remote's state is not left RUNNING, and the next MP runs."""
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    bare, _url, ws, orch = channel
    working, go = tmp_path / "working", tmp_path / "go"
    configure(ws, [level("good", "good.py", "--touch", str(working), "--wait-for", str(go))])  # a local edit
    push_mp(orch, ONE)
    first = make_engine(ws)
    first.stop.set()
    assert sync_tick(first).action == "interrupted"  # claimed, its work branch made, paused
    first.sync.close()  # the process dies; its successor starts as a daemon does
    engine = Engine(ws, load_config(ws.root), redact=Redactor.from_config(load_config(ws.root)), git=True)
    engine.start(daemon=True)
    assert remote_log(bare)[0] == "mp-engine: engine started (RUNNING)"

    def orchestrator() -> None:
        wait_for(working.exists, what="the agent at work")
        push_mp(orch, "# MP-9.3 The next\n\n```bash\necho next > next.txt\n```\n")
        go.touch()

    helper = threading.Thread(target=orchestrator, daemon=True)
    helper.start()
    assert sync_tick(engine).action == "completed"
    helper.join(timeout=30)
    assert sync_tick(engine).action == "completed"  # the next MP was pulled and ran
    results = [json.loads(line) for line in (ws.system_dir / "results.jsonl").read_text().splitlines()]
    assert [(r["mp_id"], r["status"]) for r in results] == [("MP-3.2", "COMPLETED"), ("MP-9.3", "COMPLETED")]
    assert not events(ws, "sync_conflict") and not events(ws, "halted")
    remote_state = json.loads(remote_file(bare, "SESSION_STATE.json"))
    assert remote_state["status"] == "ONLINE" and remote_state["last_result"]["mp_id"] == "MP-9.3"
    log = remote_log(bare)
    assert "MP-3.2: merge mp/MP-3.2" in log and log.count("MP-3.2: COMPLETED") == 1
    work = json.loads(remote_file(bare, "SYSTEM/RESULT_last.json", ref="main~2"))["work"]
    assert work["how"] == "merge" and git(bare, "merge-base", "--is-ancestor", work["commit"], "main") == ""
    assert remote_file(bare, "out/a.txt") == "hello\n" and remote_file(bare, "next.txt") == "next\n"
