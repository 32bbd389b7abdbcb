"""Rebasing the engine's unpushed commits without rewriting its own files in the tree:
a reader of SESSION_STATE.json never sees it missing, torn or going backwards (issue #19)."""

from __future__ import annotations

import json
import os
import threading

import mp_engine.sync.pull as pull
from tests.conftest import events, read_state
from tests.gitutil import git, make_engine, push_file, push_mp, remote_log, sync_tick


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


def test_a_local_edit_in_a_path_the_remote_changed_falls_back_to_git_rebase(parts):
    _bare, ws, orch, c, s = parts
    push_file(orch, "shared.txt", "one\ntwo\nthree\n", "shared")
    pull.integrate(c, s, pull.ls_remote(c, s), "")
    local_commit(ws, "mine.txt", "x\n", "MP-1.1: COMPLETED")
    (ws.root / "shared.txt").write_text("ONE\ntwo\nthree\n")  # not committed
    tip = push_file(orch, "shared.txt", "one\ntwo\nTHREE\n", "theirs")
    assert pull.integrate(c, s, tip, "").integrated
    assert events(ws, "sync_rebase_fallback")
    assert (ws.root / "shared.txt").read_text() == "ONE\ntwo\nTHREE\n"


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
