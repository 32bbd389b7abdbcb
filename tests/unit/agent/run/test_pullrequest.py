"""The rounds of a run that lands as a pull request (mp_engine/agent/run/pullrequest.py),
through `Engine.tick()` with a real git remote and the memory forge: each action is taken
once, whatever a restart finds recorded (the e2e tests kill the real daemon at each point)."""

from __future__ import annotations

import json

from mp_engine.forge.base import CheckState
from mp_engine.pipeline.engine import Engine
from mp_engine.record.archive import RunArchive
from tests.agentutil import only_run
from tests.conftest import drop, events, result_field
from tests.unit.agent.run.repos import BRANCH, MP, engine, git, until_done


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
