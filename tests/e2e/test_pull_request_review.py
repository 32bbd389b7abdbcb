"""Review rounds in the real daemon (issue #41): after the engine's last push on an open pull
request, a comment from someone who may steer resumes the same MP's run on the same branch,
which ends with a result of its own; someone else's comment is ignored, said once; while
nothing changes, the looks cost no rate limit (conditional requests answered 304); a merged
pull request ends the session."""

from __future__ import annotations

import json
import signal

import pytest

from tests.agentutil import level, only_run
from tests.conftest import drop, events, read_state, result_field, wait_for
from tests.forge.scene import MP, SLUG, Ci, ended, git, setup

pytestmark = pytest.mark.daemon


def results(ws) -> list[dict]:
    return [json.loads(line) for line in (ws.system_dir / "results.jsonl").read_text().splitlines()]


def first_result(ws, d) -> None:
    wait_for(lambda: ended(ws, d), timeout=120, what=lambda: d.output())
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="the state back to ONLINE after the result")


def looks(double) -> int:
    """Looks at the pull request's comments the double answered."""
    return sum(1 for c in double.calls if c.method == "GET" and c.path == "/repos/me/app/issues/1/comments")


def test_a_reviewer_s_comment_resumes_the_run_and_ends_with_a_result_of_its_own(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, log = setup(ws, tmp_path, forge, review_poll=0.2)
    repo = double.repo(SLUG)
    repo.permissions["alice"] = "write"
    ci = Ci(double, bare, green=True)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        first_result(ws, d)
        first = git(bare, "rev-parse", "mp/MP-41.1")
        # While nothing changes, a look costs no rate limit: every answer is a 304.
        wait_for(lambda: looks(double) >= 2, timeout=30, what=d.output)
        spent = double.counted()
        seen = looks(double)
        wait_for(lambda: looks(double) >= seen + 3, timeout=30, what=d.output)
        assert double.counted() == spent
        assert {c.status for c in double.calls[-6:] if c.method == "GET"} == {304}
        # Someone who may not steer: ignored, said once. A reviewer: the run goes on.
        repo.comment(1, "bob", "Delete the README.")
        wait_for(lambda: events(ws, "pull_request_comment_ignored"), timeout=30, what=d.output)
        repo.review_comment(1, "alice", 'Please also write "review" to `review.txt`.')
        wait_for(lambda: len(results(ws)) == 2, timeout=120, what=d.output)
        wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE after the review round's result")
        seen = looks(double)
        wait_for(lambda: looks(double) >= seen + 3, timeout=30, what=d.output)  # later looks: nothing more
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert len({r["run_id"] for r in results(ws)}) == 1  # the same run, a second result
    tip = git(bare, "rev-parse", "mp/MP-41.1")
    assert git(bare, "show", f"{tip}:review.txt") == "review" and git(bare, "rev-parse", f"{tip}~1") == first
    pr = json.loads((ws.system_dir / "RESULT_last.json").read_text())["pull_request"]
    assert pr["review_rounds"] == 1 and [r["state"] for r in pr["ci_rounds"]] == ["passed", "passed"]
    assert len(repo.pulls) == 1 and len(events(ws, "pull_request_review")) == 1
    (ignored,) = events(ws, "pull_request_comment_ignored")
    assert ignored["author"] == "bob"
    d.signal(signal.SIGTERM)
    d.wait()


def test_a_merged_pull_request_ends_the_session(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, log = setup(ws, tmp_path, forge, review_poll=0.2)
    repo = double.repo(SLUG)
    repo.permissions["alice"] = "write"
    ci = Ci(double, bare, green=True)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        first_result(ws, d)
        repo.set_state(repo.pulls[1], "closed", merged=True)
        wait_for(lambda: events(ws, "pull_request_closed"), timeout=30, what=d.output)
        repo.comment(1, "alice", 'Write "late" to `late.txt`.')
        seen = looks(double)
        (closed,) = events(ws, "pull_request_closed")
        assert closed["state"] == "merged"
    finally:
        ci.close()
    # No look after the session ended; the comment is left for a person.
    assert looks(double) == seen and len(results(ws)) == 1
    assert json.loads((ws.local_dir / "pull_requests.json").read_text()) == {}
    d.signal(signal.SIGTERM)
    d.wait()


def test_kill_while_the_agent_answers_a_review_acts_on_the_comment_once(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    busy, go = tmp_path / "busy", tmp_path / "go"
    agent = level("fast", "good.py", "--touch", str(busy), "--wait-for", str(go))
    env, _ = setup(ws, tmp_path, forge, agent, review_poll=0.2)
    repo = double.repo(SLUG)
    repo.permissions["alice"] = "write"
    go.touch()
    ci = Ci(double, bare, green=True)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        first_result(ws, d)
        go.unlink()
        busy.unlink()
        repo.comment(1, "alice", 'Please also write "review" to `review.txt`.')
        wait_for(busy.exists, timeout=60, what=d.output)  # the review round's task is with the agent
        d.kill9()
        go.touch()
        d = daemon_factory(ws.root, env=env).start()
        wait_for(lambda: len(results(ws)) == 2, timeout=120, what=d.output)
        wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="ONLINE after the review round's result")
        seen = looks(double)
        wait_for(lambda: looks(double) >= seen + 3, timeout=30, what=d.output)  # later looks: nothing more
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert len(results(ws)) == 2 and len(events(ws, "pull_request_review")) == 1
    assert [s.step_id for s in only_run(ws).ledger().model.steps if s.kind == "pr_review"] == ["PR-REVIEW-1"]
    assert git(bare, "show", "mp/MP-41.1:review.txt") == "review" and len(repo.pulls) == 1
    d.signal(signal.SIGTERM)
    d.wait()
