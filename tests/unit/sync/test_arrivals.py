"""Git history as the queue (issue #14): every commit that sets the inbox file to new
content is one MP, run once, in commit order, whatever the orchestrator's timing."""

from __future__ import annotations

import json

import pytest

from tests.conftest import events, read_state
from tests.gitutil import git, make_engine, push_mp, remote_file, remote_log, sync_tick

INBOX = "Claude_Inbox/incoming_microproject.txt"


def mp(n: int, body: str = "echo ran") -> str:
    return f"# MP-5.{n} Queued\n\n```bash\n{body} >> order.txt\n```\n"


def results(ws) -> list[tuple[str, str]]:
    """(MP id, status) of every run, oldest first, from the run archives."""
    runs = [p for p in ws.runs_dir.iterdir() if p.is_dir()]
    runs.sort(key=lambda run: (json.loads((run / "ledger.json").read_text())["created_at"], run.name))
    return [(d["mp_id"], d["status"]) for d in (json.loads((run / "result.json").read_text()) for run in runs)]


def remote_index(bare) -> list[tuple[str, str]]:
    """(MP id, status) of each line of SYSTEM/results.jsonl on the remote."""
    text = remote_file(bare, "SYSTEM/results.jsonl") or ""
    return [(r["mp_id"], r["status"]) for r in map(json.loads, text.splitlines())]


def drain(engine, limit: int = 10) -> list[str]:
    actions = []
    for _ in range(limit):
        action = sync_tick(engine).action
        if action == "idle":
            return actions
        actions.append(action)
    raise AssertionError(f"the engine never went idle: {actions}")


def test_three_mps_in_three_commits_between_two_polls_run_in_commit_order(channel):
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    for n in (1, 2, 3):
        push_mp(orch, mp(n, f"echo {n}"))
    assert drain(engine) == ["completed", "completed", "completed"]
    assert (ws.root / "order.txt").read_text() == "1\n2\n3\n"
    assert results(ws) == [("MP-5.1", "COMPLETED"), ("MP-5.2", "COMPLETED"), ("MP-5.3", "COMPLETED")]
    assert remote_file(bare, INBOX) is None
    state = json.loads(remote_file(bare, "SESSION_STATE.json"))
    assert state["status"] == "ONLINE" and state["last_result"]["mp_id"] == "MP-5.3"
    assert [s for s in remote_log(bare) if s.endswith("COMPLETED")] == [f"MP-5.{n}: COMPLETED" for n in (3, 2, 1)]
    assert not len(engine.inbox.queue)
    assert remote_index(bare) == results(ws)
    last = json.loads(remote_file(bare, "SYSTEM/RESULT_last.json"))
    assert last["mp_id"] == "MP-5.3" and last["mp_sha256"] == state["last_result"]["mp_sha256"]


def test_the_next_mp_pushed_while_one_runs_keeps_the_slot_without_a_conflict(channel):
    """The engine's result commit deletes the inbox file that the orchestrator's newer
    commit changed: resolved inside the engine, the newer MP runs next, nothing halts."""
    bare, _url, ws, orch = channel
    nxt = orch.parent / "next.txt"
    nxt.write_text(mp(2, "echo second"))
    first = (
        "# MP-5.1 Pushes the next one\n\n```bash\n"
        f"cd {orch} && git pull -q --ff-only && cp {nxt} {INBOX} && git add {INBOX} "
        "&& git commit -qm 'next MP, early' && git push -q origin HEAD:main\n"
        "cd - >/dev/null && echo first >> order.txt\n```\n"
    )
    push_mp(orch, first)
    engine = make_engine(ws)
    assert drain(engine) == ["completed", "completed"]
    assert (ws.root / "order.txt").read_text() == "first\nsecond\n"
    assert results(ws) == [("MP-5.1", "COMPLETED"), ("MP-5.2", "COMPLETED")]
    assert not events(ws, "sync_conflict") and read_state(ws).get("halt") is None
    log = remote_log(bare)
    assert log[0] == "MP-5.2: COMPLETED" and "MP-5.1: COMPLETED" in log and "next MP, early" in log
    assert remote_file(bare, INBOX) is None
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["status"] == "ONLINE"


def test_an_mp_waiting_in_the_slot_is_queued_when_a_pull_replaces_it(channel):
    """Halted: the waiting MP does not approve; the next pull replaces it. The replaced one
    ends SUPERSEDED (with a result), the approving one runs."""
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, "# MP-6.0 Fails\n\n```bash\nexit 3\n```\n")
    assert sync_tick(engine).action == "error"
    push_mp(orch, mp(1))
    assert sync_tick(engine).action == "halted"
    push_mp(orch, "# MP-6.2 Approves\nApproves: MP-6.0\n\n```bash\necho approved >> order.txt\n```\n")
    assert drain(engine) == ["superseded", "completed"]
    assert results(ws) == [("MP-6.0", "ERROR"), ("MP-5.1", "SUPERSEDED"), ("MP-6.2", "COMPLETED")]
    assert (ws.root / "order.txt").read_text() == "approved\n"
    superseded = remote_log(bare)
    assert "MP-5.1: SUPERSEDED" in superseded and superseded[0] == "MP-6.2: COMPLETED"
    assert remote_index(bare) == results(ws)


def test_a_pull_that_conflicts_queues_nothing_twice(channel):
    """A pull that is not integrated takes back what it queued; the MPs run once each."""
    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    for name, text in (("a", mp(2, "echo a")), ("b", mp(3, "echo b"))):
        (orch.parent / f"{name}.txt").write_text(text)
    body = (
        "# MP-7.1 Conflict\n\n```file notes.txt\nengine\n```\n\n```bash\n"
        f"cd {orch} && git pull -q --ff-only && echo orch > notes.txt && git add notes.txt "
        "&& git commit -qm 'orchestrator edits notes.txt' && git push -q origin HEAD:main\n"
        f"cp ../a.txt {INBOX} && git add {INBOX} && git commit -qm 'MP-5.2' && git push -q origin HEAD:main\n"
        f"cp ../b.txt {INBOX} && git add {INBOX} && git commit -qm 'MP-5.3' && git push -q origin HEAD:main\n```\n"
    )
    push_mp(orch, body)
    assert sync_tick(engine).action == "error"  # the notes.txt conflict
    assert not len(engine.inbox.queue)
    git(orch, "pull", "-q", "--ff-only", check=False)
    git(orch, "revert", "--no-edit", "HEAD~2")
    git(orch, "push", "-q", "origin", "HEAD:main")
    push_mp(orch, "# MP-7.4 Go on\nApproves: MP-7.1\n\n```bash\necho c >> order.txt\n```\n")
    drain(engine)
    # Halted by the conflict: the two MPs that arrived meanwhile do not approve the halt,
    # so each ends SUPERSEDED, once; the approving one runs.
    assert results(ws) == [
        ("MP-7.1", "COMPLETED"),
        ("MP-7.1", "ERROR"),
        ("MP-5.2", "SUPERSEDED"),
        ("MP-5.3", "SUPERSEDED"),
        ("MP-7.4", "COMPLETED"),
    ]
    assert (ws.root / "order.txt").read_text() == "c\n" and read_state(ws).get("halt") is None
    assert not len(engine.inbox.queue) and remote_file(bare, INBOX) is None


def test_a_pull_that_fails_on_a_full_disk_queues_the_waiting_mp_once_though_the_head_moved(channel, monkeypatch):
    """Issue #45 (the soak): a pull failed on a full disk (git could not write), and so did
    taking back what it had queued (the queue's index could not be written). The engine
    then committed (its HEAD moved) and the next pull queued the MP waiting in the slot a
    second time: it ended SUPERSEDED twice, two results for one arrival."""
    import errno

    import mp_engine.sync.pull as pull
    from mp_engine.core.errors import SyncError
    from mp_engine.inbox.queue import MPQueue

    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, "# MP-6.0 Fails\n\n```bash\nexit 3\n```\n")
    assert sync_tick(engine).action == "error"
    push_mp(orch, mp(1))
    assert sync_tick(engine).action == "halted"  # MP-5.1 waits in the slot
    push_mp(orch, mp(2))

    def disk_full(*_a, **_k):
        raise SyncError("`git read-tree` failed (exit 128): fatal: write error. Out of diskspace")

    def index_unwritable(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(pull, "bring_in", disk_full)
        m.setattr(MPQueue, "rollback", index_unwritable)
        with pytest.raises(OSError):
            sync_tick(engine)
    git(ws.root, "-c", "user.name=op", "-c", "user.email=op@x", "commit", "-q", "--allow-empty", "-m", "the head moves")
    push_mp(orch, "# MP-6.2 Approves\nApproves: MP-6.0\n\n```bash\necho approved >> order.txt\n```\n")
    drain(engine)
    assert results(ws) == [
        ("MP-6.0", "ERROR"),
        ("MP-5.1", "SUPERSEDED"),
        ("MP-5.2", "SUPERSEDED"),
        ("MP-6.2", "COMPLETED"),
    ]


def cut_short(ws, text: str) -> None:
    """What a fast-forward cut short by a full disk leaves: the incoming inbox file in the
    working tree, not in the index nor HEAD."""
    (ws.root / INBOX).write_text(text)


def test_an_mp_a_cut_short_move_left_in_the_slot_runs_once(channel):
    """Issue #45 (the soak): the next pull took the copy a cut-short move had left for an MP
    waiting in the slot and queued it, then brought the same version in: it ran twice."""
    _bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, mp(1))
    cut_short(ws, mp(1))
    drain(engine)
    assert results(ws) == [("MP-5.1", "COMPLETED")] and (ws.root / "order.txt").read_text() == "ran\n"


def test_the_mp_waiting_when_a_move_was_cut_short_still_gets_its_result(channel):
    """Halted, MP-5.1 waits in the slot; a cut-short move wrote MP-5.2 over it; MP-6.2
    approves. MP-5.1 was lost (never queued: its bytes were no longer in the slot) and the
    copy of MP-5.2 was queued as if it waited."""
    _bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, "# MP-6.0 Fails\n\n```bash\nexit 3\n```\n")
    assert sync_tick(engine).action == "error"
    push_mp(orch, mp(1))
    assert sync_tick(engine).action == "halted"
    push_mp(orch, mp(2))
    cut_short(ws, mp(2))
    push_mp(orch, "# MP-6.2 Approves\nApproves: MP-6.0\n\n```bash\necho approved >> order.txt\n```\n")
    drain(engine)
    assert results(ws) == [
        ("MP-6.0", "ERROR"),
        ("MP-5.1", "SUPERSEDED"),
        ("MP-5.2", "SUPERSEDED"),
        ("MP-6.2", "COMPLETED"),
    ]


class _EngineDied(BaseException):
    """Stands for SIGKILL: nothing after it runs (not caught as an Exception)."""


def test_the_mp_a_killed_engine_was_running_is_not_queued_by_the_restart_s_first_pull(channel, monkeypatch):
    """Issue #45 (the soak, twice in 300 MPs): the daemon was killed while an MP from the slot
    ran, and the orchestrator pushed the next one. The restart pulled before it resumed the
    open run, when nothing yet told the inbox that the slot's MP was the engine's: it was
    queued as an MP waiting in the slot, so it ran again after its recovery finished it."""
    from mp_engine.record.ledger import Ledger

    bare, _url, ws, orch = channel
    engine = make_engine(ws)
    push_mp(orch, mp(1))

    def die(*_a, **_k):
        raise _EngineDied

    with monkeypatch.context() as m:
        m.setattr(Ledger, "spawned", die)
        with pytest.raises(_EngineDied):
            sync_tick(engine)
    assert read_state(ws)["status"] == "RUNNING"
    push_mp(orch, mp(2))
    restarted = make_engine(ws)
    drain(restarted)
    assert results(ws) == [("MP-5.1", "COMPLETED"), ("MP-5.2", "COMPLETED")]
    assert remote_index(bare) == results(ws)
    assert not events(ws, "inbox_queued")
