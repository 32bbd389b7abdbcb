"""An agent MP on another repository, landed as a pull request and carried through CI, in
the real daemon (issue #41): the repository a real git remote over HTTP behind a token, the
forge the GitHub double (tests/forge/), which checks every request against GitHub's OpenAPI
description, and a CI of the test's own that judges each pushed commit."""

from __future__ import annotations

import json
import signal

import pytest

from mp_engine.config.load import load_config
from mp_engine.views.status import status_report
from tests.agentutil import calls, only_run
from tests.conftest import drop, read_state, result_field, wait_for
from tests.forge.scene import MP, SLUG, Ci, ended, files, setup

pytestmark = pytest.mark.daemon


def test_red_ci_goes_back_to_the_agent_and_green_ends_the_run_with_one_pull_request(
    ws, daemon_factory, tmp_path, forge
):
    token, double, served, bare = forge
    env, log = setup(ws, tmp_path, forge, ci_rounds=2)
    ci = Ci(double, bare)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        wait_for(lambda: ended(ws, d), timeout=120, what=lambda: d.output())
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert [c for _, c in ci.judged] == ["failure", "success"]  # two pushes: red, then green
    pulls = list(double.repo(SLUG).pulls.values())
    assert len(pulls) == 1 and pulls[0].head == "mp/MP-41.1" and pulls[0].base == "main"  # one pull request
    result = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    pr = result["pull_request"]
    assert pr["number"] == pulls[0].number and pr["head_sha"] == ci.judged[-1][0]
    assert [r["state"] for r in pr["ci_rounds"]] == ["failed", "passed"]
    # The second round's prompt quotes what CI said; its task made CI pass.
    run = only_run(ws)
    assert [c["mt"] for c in calls(log)] == ["MT-001", "MT-002"]
    prompt = (run.dir / "agent" / "MT-002" / "iter-001" / "prompt.md").read_text()
    assert "ci.txt is missing" in prompt and "Make CI pass" in prompt
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="the state back to ONLINE after the result")
    # `status` says it: the last result's pull request, and that it waits for review.
    report = status_report(ws, load_config(ws.root))
    assert report["last_mp"]["pull_request"]["number"] == pr["number"]
    assert [(w["number"], w["ci"]) for w in report["for_review"]] == [(pr["number"], "passed")]
    d.signal(signal.SIGTERM)
    d.wait()
    # The token never left the process that holds it: no file the engine wrote has it.
    assert not [p for p in files(ws.root) if token.encode() in p.read_bytes()]


def test_ci_red_with_the_rounds_used_up_ends_blocked_and_leaves_the_pull_request_open(
    ws, daemon_factory, tmp_path, forge
):
    token, double, served, bare = forge
    env, log = setup(ws, tmp_path, forge, ci_rounds=1)
    ci = Ci(double, bare, fixable=False)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        wait_for(lambda: ended(ws, d), timeout=120, what=lambda: d.output())
    finally:
        ci.close()
    assert result_field(ws, "Status") == "ERROR"
    text = ws.result_file.read_text()
    assert "ci_failed" in text and "tests" in text
    pulls = list(double.repo(SLUG).pulls.values())
    assert len(pulls) == 1 and pulls[0].state == "open"
    assert [c for _, c in ci.judged] == ["failure"]  # one round: no fix pushed
    d.signal(signal.SIGTERM)
    d.wait()
