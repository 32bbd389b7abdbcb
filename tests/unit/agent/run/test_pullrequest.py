"""The rounds of a run that lands as a pull request (mp_engine/agent/run/pullrequest.py),
through `Engine.tick()` with a real git remote and the memory forge: each action is taken
once, whatever a restart finds recorded (the e2e tests kill the real daemon at each point)."""

from __future__ import annotations

import functools
import json
from collections import Counter

import pytest

from mp_engine.forge.base import CheckState
from mp_engine.forge.credentials import Token
from mp_engine.forge.github import GitHubForge
from mp_engine.forge.mirror import RepoMirror
from mp_engine.pipeline.context import Action, TickResult
from mp_engine.pipeline.engine import Engine
from mp_engine.record.archive import RunArchive
from tests.agentutil import only_run
from tests.conftest import drop, events, read_state, result_field, wait_for
from tests.forge import openapi
from tests.forge.github_double import GitHubDouble
from tests.unit.agent.run.repos import BRANCH, MP, TOKEN, engine, git, passed, until_done

SLUG = "me/app"


def pull_request(ws) -> dict:
    return json.loads((ws.system_dir / "RESULT_last.json").read_text())["pull_request"]


def test_green_ci_ends_the_run_with_one_pull_request_and_its_session_in_the_result(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch)
    drop(ws, MP)
    res = until_done(eng, forge, bare)
    assert res.action == "completed", ws.result_file.read_text()
    (pr,) = forge.pulls.values()
    tip = git(bare, "rev-parse", BRANCH)
    assert (pr.head, pr.base, pr.state) == (BRANCH, "main", "open") and "MP-41.2" in pr.body
    out = pull_request(ws)
    assert out["number"] == pr.number and out["head_sha"] == tip and out["pushed_at"]
    assert [r["state"] for r in out["ci_rounds"]] == ["passed"]
    kinds = [s.kind for s in only_run(ws).ledger().model.steps if s.kind in ("pr", "ci")]
    assert kinds == ["pr", "pr", "ci"]  # pushed, opened, CI's verdict


def test_a_restart_after_the_verdict_asks_ci_nothing_more_and_ends_as_recorded(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch)
    drop(ws, MP)
    until_done(eng, forge, bare)
    asked = list(forge.asked)
    # As after a crash between the verdict and the result: the run is open again.
    run = only_run(ws)
    run.ledger().reopen("a restart after CI's verdict")
    eng.state.update(run_id=run.run_id, current="MP-41.2", reason="test: resume")
    again = Engine(ws, eng.config)
    again.repos["app"] = eng.repos["app"]
    again.start(daemon=False)
    res = until_done(again, forge, bare)
    assert res.action == "completed"
    assert forge.asked == asked  # the recorded verdict was not asked for again
    assert [s.step_id for s in RunArchive(run.dir).ledger().model.steps if s.kind == "ci"] == ["CI-1"]
    assert len(forge.pulls) == 1 and [r["state"] for r in pull_request(ws)["ci_rounds"]] == ["passed"]


def test_a_push_the_remote_has_but_the_run_never_recorded_is_recorded_not_made_again(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch)
    drop(ws, MP)
    until_done(eng, forge, bare)
    run = only_run(ws)
    ledger = run.ledger()
    # Forget the push, the opening and the verdict, as a crash right after the push would.
    ledger.model.steps = [s for s in ledger.model.steps if s.kind not in ("pr", "ci")]
    ledger.reopen("a restart after the push")
    eng.state.update(run_id=run.run_id, current="MP-41.2", reason="test: resume")
    again = Engine(ws, eng.config)
    again.repos["app"] = eng.repos["app"]
    again.start(daemon=False)
    until_done(again, forge, bare)
    assert [e["sha"] for e in events(ws, "pull_request_push_found")] == [git(bare, "rev-parse", BRANCH)]
    assert len(events(ws, "pull_request_pushed")) == 1 and len(forge.pulls) == 1


def test_red_ci_with_the_rounds_used_up_ends_blocked_and_the_pull_request_keeps_the_last_push(
    ws, tmp_path, monkeypatch
):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch, ci_rounds=1)
    drop(ws, MP)
    res = until_done(eng, forge, bare, green=False)
    assert res.action == "error" and "ci_failed" in ws.result_file.read_text()
    out = pull_request(ws)
    assert [r["state"] for r in out["ci_rounds"]] == ["failed"] and out["head_sha"] == git(bare, "rev-parse", BRANCH)
    assert result_field(ws, "Status") == "ERROR"
    work = json.loads((ws.system_dir / "RESULT_last.json").read_text())["work"]
    assert work["how"] == "not landed" and "keeps the engine's last push" in work["note"]


def test_ci_that_has_not_finished_makes_the_run_wait_and_status_shows_the_pull_request(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch)
    drop(ws, MP)
    res = eng.tick()
    while res.action != "waiting" or not git(bare, "branch", "--list", BRANCH):
        res = eng.tick()
    shown = json.loads((only_run(ws).dir / "agent" / "progress.json").read_text())["pull_request"]
    assert shown["number"] == 1 and shown["waiting"]["kind"] == "ci" and "waiting for CI" in shown["ci_now"]
    forge.pass_(git(bare, "rev-parse", BRANCH), CheckState.PASSED)
    assert until_done(eng, forge, bare).action == "completed"


# -- what goes wrong on the way (review findings 3, 5 and 9) --------------------------------


@pytest.fixture
def github():
    """The GitHub double (tests/forge/), checked at the end against GitHub's description."""
    openapi.openapi()
    double = GitHubDouble(TOKEN)
    double.repo(SLUG)
    yield double
    double.close()
    assert double.violations == [], "requests or answers GitHub's description does not allow"


def on_github(ws, tmp_path, monkeypatch, double: GitHubDouble):
    """The engine with GitHub's client against the double as `[repos.app]`'s forge."""
    forge = GitHubForge(SLUG, double.url, Token(TOKEN, "APP_TOKEN"), sleep=lambda s: None)
    eng, _, bare = engine(ws, tmp_path, monkeypatch, forge=forge)
    double.remotes[SLUG] = str(bare)
    return eng, bare


def ticks(eng: Engine, *, until=lambda res: False, limit: int = 40) -> TickResult:
    """Tick (each wait waited out) until the run ends, `until(res)` holds, or `limit` ticks."""
    res = eng.tick()
    for _ in range(limit):
        if res.action in (Action.COMPLETED, Action.ERROR) or until(res):
            return res
        if res.action is Action.WAITING and res.wait_until is not None:
            wait_for(functools.partial(passed, res.wait_until), timeout=10, interval=0.005)
        res = eng.tick()
    return res


def result(ws) -> dict:
    return json.loads((ws.system_dir / "RESULT_last.json").read_text())


def waiting_for(ws) -> str | None:
    return (read_state(ws).get("waiting") or {}).get("kind")


def test_a_remote_that_cannot_be_reached_at_the_push_makes_the_run_wait_then_go_on(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch)
    push, tried = RepoMirror.push, []

    def away_once(self, *args, **kwargs):  # the first push goes to a remote that is not there
        if tried:
            return push(self, *args, **kwargs)
        tried.append(self.url)
        self.url = f"file://{tmp_path}/gone/app.git"
        try:
            return push(self, *args, **kwargs)
        finally:
            self.url = tried[0]

    monkeypatch.setattr(RepoMirror, "push", away_once)
    drop(ws, MP)
    res = ticks(eng, until=lambda res: res.action is Action.WAITING and waiting_for(ws) is not None)
    assert res.action is Action.WAITING and waiting_for(ws) == "repository", ws.result_file.read_text()
    shown = json.loads((only_run(ws).dir / "agent" / "progress.json").read_text())["pull_request"]
    assert shown["waiting"]["kind"] == "repository" and "could not reach" in shown["waiting"]["reason"]
    assert not git(bare, "branch", "--list", BRANCH)  # nothing reached it
    assert until_done(eng, forge, bare).action == "completed"
    assert len(forge.pulls) == 1 and pull_request(ws)["head_sha"] == git(bare, "rev-parse", BRANCH)


def test_a_git_failure_at_the_push_ends_the_mp_with_the_error_and_a_fix(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch)
    (bare / "refs" / "heads" / "mp").mkdir(parents=True)
    (bare / "refs" / "heads" / "mp" / "MP-41.2.lock").touch()  # the remote cannot take the branch
    drop(ws, MP)
    res = ticks(eng)
    assert res.action is Action.ERROR
    out = result(ws)
    d = out["diagnosis"]
    assert d["kind"] == "pull_request_git" and "MP-41.2.lock" in d["text"], d
    assert "mirror.git" in out["fix"] and "Approves: MP-41.2" in out["fix"]
    assert out["pull_request"]["ended"] == "pull_request_git" and not forge.pulls


def test_a_404_from_github_ends_the_mp_with_github_s_words_and_a_fix_not_a_wait(ws, tmp_path, monkeypatch, github):
    github.inject(404, path="/check-runs", times=100, message="Not Found")
    eng, bare = on_github(ws, tmp_path, monkeypatch, github)
    drop(ws, MP)
    res = ticks(eng)
    assert res.action is Action.ERROR, f"{res.action}: {waiting_for(ws)}"
    out = result(ws)
    d = out["diagnosis"]
    assert d["kind"] == "pull_request_forge" and "(404)" in d["text"], d
    assert "[repos.app]" in out["fix"] and "Approves: MP-41.2" in out["fix"]
    (pr,) = github.repo(SLUG).pulls.values()
    assert pr.state == "open" and out["pull_request"]["number"] == pr.number  # left for a person


def test_a_422_from_github_ends_the_mp_with_github_s_words(ws, tmp_path, monkeypatch, github):
    github.inject(422, path="/pulls", method="POST", times=5, message="Validation Failed")
    eng, bare = on_github(ws, tmp_path, monkeypatch, github)
    drop(ws, MP)
    res = ticks(eng)
    assert res.action is Action.ERROR, f"{res.action}: {waiting_for(ws)}"
    d = result(ws)["diagnosis"]
    assert d["kind"] == "pull_request_forge" and "422: Validation Failed" in d["text"], d
    assert not github.repo(SLUG).pulls


def test_github_away_still_makes_the_run_wait_then_go_on(ws, tmp_path, monkeypatch, github):
    github.inject(502, path="/check-runs", times=6, message="Bad Gateway")  # past the client's retries
    eng, bare = on_github(ws, tmp_path, monkeypatch, github)
    drop(ws, MP)
    res = ticks(eng, until=lambda res: waiting_for(ws) == "forge_unavailable")
    assert waiting_for(ws) == "forge_unavailable", res
    github.repo(SLUG).add_check(git(bare, "rev-parse", BRANCH), "tests", conclusion="success", summary="ok")
    assert ticks(eng).action is Action.COMPLETED, ws.result_file.read_text()


def test_polling_a_pending_ci_adds_no_pause_no_event_and_no_recovery_per_poll(ws, tmp_path, monkeypatch):
    eng, forge, bare = engine(ws, tmp_path, monkeypatch)
    drop(ws, MP)
    res = ticks(eng, until=lambda res: res.action is Action.WAITING and waiting_for(ws) == "ci")
    forge.pass_(git(bare, "rev-parse", BRANCH), CheckState.PENDING)  # CI runs: each poll says so
    run = only_run(ws)

    def written() -> tuple:
        progress = json.loads((run.dir / "agent" / "progress.json").read_text())
        said = Counter(e["event"] for e in map(json.loads, ws.events_file.read_text().splitlines()))
        return said, len(progress["pauses"]), len(run.ledger().model.recoveries)

    before = written()
    for _ in range(4):
        wait_for(functools.partial(passed, res.wait_until), timeout=10, interval=0.005)
        res = eng.tick()
        assert res.action is Action.WAITING and waiting_for(ws) == "ci"
    assert written() == before  # four polls: nothing more said, paused or recovered
    assert len(forge.asked) >= 5
    forge.pass_(git(bare, "rev-parse", BRANCH), CheckState.PASSED)
    assert until_done(eng, forge, bare).action == "completed"
    (paused,) = events(ws, "micro_task_pause_requested")
    (resumed,) = events(ws, "micro_task_resumed")  # one when the wait began, one when it ended
    assert paused["kind"] == "ci" and resumed["after"] == "ci" and len(events(ws, "mp_waiting")) == 1
    pauses = json.loads((run.dir / "agent" / "progress.json").read_text())["pauses"]
    assert [p["kind"] for p in pauses] == ["ci"] and pauses[0]["ended_at"]
