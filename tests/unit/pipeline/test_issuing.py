"""Issues as a source (mp_engine/pipeline/issuing.py) through `Engine.tick()`, with a real git
remote and the memory forge: a labelled issue becomes one agent MP that lands as a pull
request saying "Fixes #N" with one comment on the issue; one with no checks is answered and
left waiting; a crash between the label swap and the queueing loses nothing and queues
nothing twice; two engines take one issue once."""

from __future__ import annotations

import functools
import json
import subprocess
import time

from mp_engine.forge.base import CheckState, Issue
from mp_engine.inbox.mpfile import parse
from mp_engine.pipeline.context import Action
from mp_engine.pipeline.issuing import Issuing
from tests.conftest import drop, events, wait_for
from tests.unit.agent.run.repos import engine, passed

BRANCH = "mp/MP-12.0"
REPO = {"issues_label": "mp-engine", "checks": ["grep -qx hello hello.txt"], "issues_poll": 0.01}


def issue(number: int = 12, body: str = 'Write "hello" to `hello.txt`.', **kw) -> Issue:
    fields = {"labels": ("mp-engine",), "author": "alice", "title": "Greet people", **kw}
    return Issue(
        number, fields["title"], body, fields["labels"], f"https://github.com/me/app/issues/{number}", fields["author"]
    )


def run_out(eng, forge, bare, limit: float = 30):
    """Tick (CI green on each push) until an MP ends."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        tip = subprocess.run(
            ["git", "-C", str(bare), "rev-parse", "-q", "--verify", f"refs/heads/{BRANCH}"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if tip and tip not in forge.checks:
            forge.pass_(tip, CheckState.PASSED)
        res = eng.tick()
        if res.action is Action.WAITING and res.wait_until is not None:
            wait_for(functools.partial(passed, res.wait_until), timeout=10, interval=0.005)
        elif res.action not in (Action.WAITING, Action.IDLE, Action.BUSY):
            return res
    raise AssertionError("no MP ended")


def test_a_labelled_issue_becomes_one_mp_landed_as_a_pull_request_that_fixes_it(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch, **REPO)
    forge.issues[12] = issue()
    res = run_out(eng, forge, bare)
    assert res.action is Action.COMPLETED and res.mp_id == "MP-12.0", ws.result_file.read_text()
    assert forge.issues[12].labels == ("mp-engine: taken",)
    [pr] = forge.pulls.values()
    assert pr.head == BRANCH and "Fixes #12" in pr.body and pr.title.endswith("Greet people")
    [said] = [c for c in forge.notes if forge.on[c.id] == 12]
    assert f"#{pr.number}" in said.body
    (taken,) = events(ws, "issue_taken")
    assert taken["number"] == 12 and taken["mp"] == "MP-12.0"
    eng.issues.next_look = 0.0
    assert eng.tick().action is Action.IDLE and len(list(ws.runs_dir.glob("*MP-*"))) == 1  # taken once


def test_an_issue_without_checks_is_answered_once_and_left_waiting(ws, tmp_path, monkeypatch):
    eng, forge, _ = engine(ws, tmp_path, monkeypatch, **{**REPO, "checks": []})
    forge.issues[12] = issue()
    for _ in range(3):
        eng.issues.next_look = 0.0
        assert eng.tick().action is Action.IDLE
    [said] = forge.notes
    assert "no `## Validate` section" in said.body and forge.issues[12].labels == ("mp-engine",)
    assert len(events(ws, "issue_not_taken")) == 1 and not list(ws.runs_dir.glob("*MP-*"))


def test_a_kill_between_the_swap_and_the_queue_loses_nothing_and_queues_once(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch, **REPO)
    forge.issues[12] = issue()
    queued = eng.inbox.queue.add

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("kill -9")  # after the labels were swapped

    monkeypatch.setattr(eng.inbox.queue, "add", killed)
    try:
        eng.issues.look()
    except KeyboardInterrupt:
        pass
    assert forge.issues[12].labels == ("mp-engine: taken",) and not eng.inbox.queue.entries()
    monkeypatch.setattr(eng.inbox.queue, "add", queued)
    again = Issuing(eng.ctx, eng.repos)  # the restarted engine's
    assert again.look() is True and len(eng.inbox.queue.entries()) == 1
    assert again.look() is False and len(eng.inbox.queue.entries()) == 1  # never twice
    assert run_out(eng, forge, bare).action is Action.COMPLETED and len(forge.pulls) == 1


def test_a_kill_between_the_two_labels_leaves_it_waiting_and_it_is_taken_after_the_restart(ws, tmp_path, monkeypatch):
    eng, forge, _ = engine(ws, tmp_path, monkeypatch, **REPO)
    forge.issues[12] = issue()
    monkeypatch.setattr(forge, "remove_label", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt("kill -9")))
    try:
        eng.issues.look()
    except KeyboardInterrupt:
        pass
    assert set(forge.issues[12].labels) == {"mp-engine", "mp-engine: taken"}
    monkeypatch.undo()
    again = Issuing(eng.ctx, eng.repos)
    assert again.look() is True and forge.issues[12].labels == ("mp-engine: taken",)
    assert len(eng.inbox.queue.entries()) == 1


def test_two_engines_take_one_issue_once(ws, tmp_path, monkeypatch):
    eng, forge, _ = engine(ws, tmp_path, monkeypatch, **REPO)
    forge.issues[12] = issue()
    other = forge.remove_label

    def raced(number: int, label: str) -> bool:  # the other engine removes it first
        other(number, label)
        return other(number, label)

    monkeypatch.setattr(forge, "remove_label", raced)
    assert eng.issues.look() is False and not eng.inbox.queue.entries()
    monkeypatch.undo()
    forge.issues[12] = issue(labels=("mp-engine",))
    forge.issues[13] = issue(13)
    monkeypatch.setattr(forge, "remove_label", lambda n, lbl: raced(n, lbl) if n == 12 else other(n, lbl))
    assert eng.issues.look() is True  # the next waiting one is taken in the same look
    assert [parse(q.data()).mp_id for q in eng.inbox.queue.entries()] == ["MP-13.0"]
    assert events(ws, "issue_taken_elsewhere") and json.loads((ws.local_dir / "issues_taking.json").read_text()) == {}


def test_an_mp_in_the_slot_goes_first_and_nothing_is_looked_at_while_halted(ws, tmp_path, monkeypatch):
    eng, forge, _ = engine(ws, tmp_path, monkeypatch, **REPO)
    forge.issues[12] = issue()
    drop(ws, "# MP-1.1 First\n\n```bash\nfalse\n```\n")
    res = eng.tick()
    assert res.mp_id == "MP-1.1" and not events(ws, "issue_taken")
    eng.issues.next_look = 0.0
    eng.tick()
    assert not events(ws, "issue_taken") and forge.issues[12].labels == (
        "mp-engine",
    )  # the failed MP halted the engine: no issue taken
