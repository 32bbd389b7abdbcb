"""When GitHub says no, in the real daemon (issue #41, docs/PULL_REQUESTS.md "When things
fail"): a token without a permission ends the run in ERROR naming it; a rate limit, primary
or secondary, makes the run wait until the time GitHub gives, sending nothing before it,
and `status` says so; a 5xx is retried with backoff, then waited out, never a halt."""

from __future__ import annotations

import json
import signal

import pytest

from mp_engine.core.clock import parse_iso
from tests.conftest import drop, events, read_state, result_field, wait_for
from tests.e2e.cli import mpe
from tests.forge.scene import MP, SLUG, Ci, ended, setup

pytestmark = pytest.mark.daemon


def finish(ws, d) -> None:
    wait_for(lambda: ended(ws, d), timeout=120, what=lambda: d.output())
    wait_for(lambda: read_state(ws)["status"] in ("ONLINE", "ERROR"), what="the state after the result")


def test_a_token_without_the_permission_ends_in_error_naming_it(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge)
    double.inject(
        403,
        path="/pulls",
        method="POST",
        headers={"X-Accepted-GitHub-Permissions": "pull_requests=write"},
        message="Resource not accessible by personal access token",
    )
    d = daemon_factory(ws.root, env=env).start()
    drop(ws, MP)
    finish(ws, d)
    assert result_field(ws, "Status") == "ERROR"
    text = ws.result_file.read_text()
    assert "pull_requests=write" in text and "forge_auth" in text, text
    assert double.repo(SLUG).pulls == {}
    d.signal(signal.SIGTERM)
    d.wait()


def waited(ws, kind: str) -> dict:
    found = [e for e in events(ws, "mp_waiting") if e.get("kind") == kind]
    return found[0] if found else {}


def test_the_primary_rate_limit_is_waited_out_and_status_says_so(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge)
    ci = Ci(double, bare, green=True)
    pushed = served.hold("git-receive-pack")  # the limit is reached just as the engine turns to GitHub
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        assert pushed.reached.wait(60), d.output()
        double.exhaust_rate_limit(reset_in=8)
        reset = double.reset_at
        pushed.release.set()
        wait_for(lambda: waited(ws, "forge_rate_limit"), timeout=60, what=d.output)
        # The engine stops while it waits: what it waits for stays in the state, for `status`.
        d.signal(signal.SIGTERM)
        d.wait()
        shown = mpe("status", "--root", str(ws.root))
        assert "forge_rate_limit" in shown.stdout and "rate limit" in shown.stdout, shown.stdout
        report = json.loads(mpe("status", "--json", "--root", str(ws.root)).stdout)
        assert report["agent"]["waiting"]["kind"] == "forge_rate_limit"
        assert parse_iso(waited(ws, "forge_rate_limit")["resume_at"]).timestamp() >= reset
        d = daemon_factory(ws.root, env=env).start()
        finish(ws, d)
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    limited = next(i for i, c in enumerate(double.calls) if c.status == 403)
    assert all(c.at >= reset for c in double.calls[limited + 1 :])  # nothing sent before the reset
    d.signal(signal.SIGTERM)
    d.wait()


def test_the_secondary_rate_limit_s_retry_after_is_waited_out(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge)
    double.inject(
        403,
        path="/check-runs",
        headers={"Retry-After": "3"},
        message="You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
    )
    ci = Ci(double, bare, green=True)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        finish(ws, d)
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    wait = waited(ws, "forge_rate_limit")
    assert "secondary rate limit" in wait["reason"]
    limited = next(i for i, c in enumerate(double.calls) if c.status == 403)
    assert double.calls[limited].at + 2 <= parse_iso(wait["resume_at"]).timestamp()  # Retry-After, to the second
    assert all(c.at >= parse_iso(wait["resume_at"]).timestamp() for c in double.calls[limited + 1 :])
    d.signal(signal.SIGTERM)
    d.wait()


def test_5xx_is_retried_with_backoff_then_waited_out_never_a_halt(ws, daemon_factory, tmp_path, forge):
    token, double, served, bare = forge
    env, _ = setup(ws, tmp_path, forge)
    double.inject(502, path="/check-runs", times=4)  # three attempts in one call, then one more later
    ci = Ci(double, bare, green=True)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        finish(ws, d)
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert [c.status for c in double.calls if "/check-runs" in c.path][:5] == [502, 502, 502, 502, 200]
    assert waited(ws, "forge_unavailable")  # the run waited; the state said so
    assert not events(ws, "mp_failed") and read_state(ws)["halt"] is None
    d.signal(signal.SIGTERM)
    d.wait()
