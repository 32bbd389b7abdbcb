"""Issues as a source, in the real daemon (issue #41 item 5): one labelled issue on the
GitHub double (tests/forge/, every request checked against GitHub's OpenAPI description),
two engines on their own workspaces configured for the same repository: the issue is taken
once, becomes one MP, one pull request that fixes it, one comment on it. And a `kill -9`
after GitHub took the label off but before the engine heard it: the restarted engine queues
the MP it had written down, once."""

from __future__ import annotations

import json

import pytest

from mp_engine.core.workspace import Workspace, init_workspace
from tests.conftest import events, read_state, result_field, wait_for
from tests.forge.scene import SLUG, Ci, setup

pytestmark = pytest.mark.daemon

ISSUES = {"issues_label": "mp-engine", "issues_poll": 0.2, "checks": ["grep -qx hello hello.txt"]}
BODY = 'Write "hello" to `hello.txt`.'


def results(ws: Workspace) -> list[dict]:
    path = ws.system_dir / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def runs(ws: Workspace) -> list[str]:
    return [p.name for p in ws.runs_dir.glob("*MP-*")]


def test_two_engines_take_one_issue_once_and_answer_it_with_one_pull_request(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    other, _ = init_workspace(tmp_path / "other")
    env, _ = setup(ws, tmp_path, forge, **ISSUES)
    setup(other, tmp_path, forge, **ISSUES)
    number = double.repo(SLUG).add_issue("Greet people", BODY, labels=("mp-engine",)).number
    ci = Ci(double, bare, f"mp/MP-{number}.0", green=True)
    one, two = (daemon_factory(w.root, env=env).start() for w in (ws, other))
    try:
        done = lambda: [w for w in (ws, other) if result_field(w, "Status") in ("COMPLETED", "ERROR")]  # noqa: E731
        wait_for(lambda: done(), timeout=60, what=lambda: one.output() + two.output())
        [w] = done()
        wait_for(lambda: read_state(w)["status"] == "ONLINE", what="the state after the result")
    finally:
        ci.close()
    assert result_field(w, "Status") == "COMPLETED", w.result_file.read_text()
    assert len(runs(ws) + runs(other)) == 1 and len(results(ws) + results(other)) == 1  # one MP, one result
    repo = double.repo(SLUG)
    [pr] = repo.pulls.values()
    assert pr.head == f"mp/MP-{number}.0" and f"Fixes #{number}" in pr.body
    assert [c for c in repo.comments if c.number == number and f"#{pr.number}" in c.body] != []
    assert len([c for c in repo.comments if c.number == number]) == 1  # one comment on the issue
    assert repo.issues[number].labels == ["mp-engine: taken"]
    assert len(events(ws, "issue_taken") + events(other, "issue_taken")) == 1


def test_kill_after_github_took_the_label_off_queues_the_mp_once_after_the_restart(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge, **ISSUES)
    number = double.repo(SLUG).add_issue("Greet people", BODY, labels=("mp-engine",)).number
    held = double.hold(f"/issues/{number}/labels/", method="DELETE")  # done on GitHub, its answer held
    ci = Ci(double, bare, f"mp/MP-{number}.0", green=True)
    d = daemon_factory(ws.root, env=env).start()
    try:
        assert held.reached.wait(30), d.output()
        d.kill9()
        held.release.set()
        assert double.repo(SLUG).issues[number].labels == ["mp-engine: taken"] and not runs(ws)
        d = daemon_factory(ws.root, env=env).start()
        wait_for(lambda: result_field(ws, "Status") in ("COMPLETED", "ERROR"), timeout=60, what=lambda: d.output())
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert len(runs(ws)) == 1 and len(results(ws)) == 1 and len(double.repo(SLUG).pulls) == 1
    assert [e["number"] for e in events(ws, "issue_taken")] == [number]
