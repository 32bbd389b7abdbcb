"""`kill -9` during a pull request's rounds, in the real daemon (issue #41): after the push
went through, while the pull request was being opened, while the run waits for CI, after
CI's verdict was recorded. The next start goes on from what the run recorded: never a
second pull request, never a second push of the same work, never a CI round counted
twice, exactly one result. And a person's force-push between rounds: the run stops
(`branch_moved`) and their work stays."""

from __future__ import annotations

import json
import subprocess

import pytest

from mp_engine.core.workspace import Workspace
from tests.agentutil import calls, level, only_run
from tests.conftest import drop, events, read_state, result_field, wait_for
from tests.forge.scene import MP, SLUG, Ci, ended, git, setup

pytestmark = pytest.mark.daemon


def result(ws: Workspace) -> dict:
    return json.loads((ws.system_dir / "RESULT_last.json").read_text())


def results(ws: Workspace) -> list[dict]:
    path = ws.system_dir / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def finish(ws: Workspace, d) -> None:
    wait_for(lambda: ended(ws, d), timeout=120, what=lambda: d.output())
    wait_for(lambda: read_state(ws)["status"] in ("ONLINE", "ERROR"), what="the state after the result")


def ci_steps(ws: Workspace) -> list[str]:
    return [s.step_id for s in only_run(ws).ledger().model.steps if s.kind == "ci"]


def test_kill_after_the_push_went_through_records_it_and_pushes_nothing_twice(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge)
    held = served.hold("git-receive-pack")  # git's answer to the push is held: the push itself is done
    ci = Ci(double, bare, green=True)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        assert held.reached.wait(60), d.output()
        d.kill9()
        held.release.set()
        assert ci.tip() is not None  # the push is on the remote; its record never was
        d = daemon_factory(ws.root, env=env).start()
        finish(ws, d)
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert served.pushes("me/app") == 1  # found on the remote, recorded, not pushed again
    assert [e["sha"] for e in events(ws, "pull_request_push_found")] == [ci.tip()]
    assert len(double.repo(SLUG).pulls) == 1
    assert [r["state"] for r in result(ws)["pull_request"]["ci_rounds"]] == ["passed"]
    assert len(results(ws)) == 1


def test_kill_while_the_pull_request_is_opened_never_opens_a_second(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge)
    # The opening's answer is lost on the way (a proxy's 502 after GitHub opened it): the
    # engine looks for it by its head, and is killed before it hears that it is there.
    double.inject(502, path="/pulls", method="POST", after=True)
    held = double.hold("/repos/me/app/pulls", method="GET", skip=1)
    ci = Ci(double, bare, green=True)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        assert held.reached.wait(60), d.output()
        d.kill9()
        held.release.set()
        d = daemon_factory(ws.root, env=env).start()
        finish(ws, d)
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    pulls = list(double.repo(SLUG).pulls.values())
    assert len(pulls) == 1 and pulls[0].state == "open"
    assert result(ws)["pull_request"]["number"] == pulls[0].number
    assert [c.method for c in double.calls if c.path == "/repos/me/app/pulls" and c.method == "POST"] == ["POST"]
    assert served.pushes("me/app") == 1 and len(results(ws)) == 1


def test_kill_while_the_run_waits_for_ci_goes_on_waiting_after_the_restart(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge)
    d = daemon_factory(ws.root, env=env).start()
    drop(ws, MP)
    wait_for(lambda: (read_state(ws).get("waiting") or {}).get("kind") == "ci", timeout=60, what=d.output)
    d.kill9()
    ci = Ci(double, bare, green=True)  # CI reports only once the engine is down
    try:
        d = daemon_factory(ws.root, env=env).start()
        finish(ws, d)
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert served.pushes("me/app") == 1 and len(double.repo(SLUG).pulls) == 1
    assert [r["state"] for r in result(ws)["pull_request"]["ci_rounds"]] == ["passed"]
    assert ci_steps(ws) == ["CI-1"] and len(results(ws)) == 1


def gated(ws: Workspace, tmp_path, forge, **repo):
    """A level whose calls wait for `go` (created by the test) and touch `busy` first."""
    busy, go = tmp_path / "busy", tmp_path / "go"
    log = tmp_path / "calls.jsonl"
    env, _ = setup(
        ws, tmp_path, forge, level("fast", "good.py", "--log", str(log), "--touch", str(busy), "--wait-for", str(go))
    )
    return env, log, busy, go


def test_kill_after_ci_s_verdict_was_recorded_counts_the_round_once(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, log, busy, go = gated(ws, tmp_path, forge, ci_rounds=2)
    go.touch()
    d = daemon_factory(ws.root, env=env).start()
    drop(ws, MP)
    wait_for(lambda: git(bare, "branch", "--list", "mp/*"), timeout=60, what=d.output)  # the first push
    go.unlink()  # the next call (the fix CI asks for) waits
    busy.unlink()
    ci = Ci(double, bare)  # red, then green once ci.txt is there
    try:
        wait_for(lambda: busy.exists(), timeout=60, what=d.output)  # CI-1 recorded, its fix task called
        assert ci_steps(ws) == ["CI-1"]
        d.kill9()
        go.touch()
        d = daemon_factory(ws.root, env=env).start()
        finish(ws, d)
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert [r["state"] for r in result(ws)["pull_request"]["ci_rounds"]] == ["failed", "passed"]
    assert ci_steps(ws) == ["CI-1", "CI-2"]  # the recorded verdict was not asked for, nor counted, again
    assert {c["mt"] for c in calls(log)} == {"MT-001", "MT-002"}
    assert served.pushes("me/app") == 2 and len(double.repo(SLUG).pulls) == 1 and len(results(ws)) == 1


def test_a_person_s_force_push_between_rounds_stops_the_run_and_keeps_their_work(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, log, busy, go = gated(ws, tmp_path, forge, ci_rounds=2)
    go.touch()
    d = daemon_factory(ws.root, env=env).start()
    drop(ws, MP)
    wait_for(lambda: git(bare, "branch", "--list", "mp/*"), timeout=60, what=d.output)
    go.unlink()
    busy.unlink()
    ci = Ci(double, bare)
    try:
        wait_for(lambda: busy.exists(), timeout=60, what=d.output)  # the agent fixes what CI said
        # Meanwhile a person force-pushes their own commit onto the work branch.
        clone = tmp_path / "person"
        subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True)
        git(clone, "checkout", "-q", "-B", "mp/MP-41.1", "origin/main")
        (clone / "mine.txt").write_text("a person's work\n")
        git(clone, "add", "mine.txt")
        git(clone, "-c", "user.name=P", "-c", "user.email=p@example.com", "commit", "-q", "-m", "mine")
        git(clone, "push", "-q", "--force", "origin", "HEAD:refs/heads/mp/MP-41.1")
        theirs = git(clone, "rev-parse", "HEAD")
        go.touch()
        finish(ws, d)
    finally:
        ci.close()
    assert result_field(ws, "Status") == "ERROR"
    text = ws.result_file.read_text()
    assert "branch_moved" in text and "someone else pushed" in text, text
    assert git(bare, "rev-parse", "refs/heads/mp/MP-41.1") == theirs  # untouched
    assert served.pushes("me/app") == 1  # the engine's first (the person pushed to the bare repository itself)
    assert result(ws)["pull_request"]["ended"] == "branch_moved"
