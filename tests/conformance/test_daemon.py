"""Conformance end to end: the real daemon (a subprocess, the way systemd runs it) with the
real codex as its agent, an MP pushed to a real git remote with `mp-engine send --wait`, the
fake OpenAI API on loopback (issue #16, and #17's "through the daemon and the git channel").

What the in-process rows cannot show: the API key held by the daemon outside its own
environment (`[secrets]`) still reaches codex through `env_allow`; codex's leftover child
processes are reaped by the daemon (a subreaper); the verified work lands on the remote's
main as one commit per micro-task, and the result names that commit."""

from __future__ import annotations

import json
import signal

import pytest

from tests.agentutil import ONE, configure
from tests.conformance.clis import codex_home, installed
from tests.conformance.fakeopenai import FakeOpenAI
from tests.conformance.test_codex import PROVIDER, codex_level, honest
from tests.conftest import read_state, wait_for
from tests.e2e.cmd_send.test_send import finish, send
from tests.e2e.conftest import GIT_ENV
from tests.gitutil import engine_workspace, git, make_remote, remote_file, remote_log

pytestmark = [pytest.mark.conformance, pytest.mark.daemon]

KEY = "sk-conformance-daemon-0123456789abcdef"


def test_the_daemon_drives_the_real_codex_over_a_git_remote(tmp_path, daemon_factory):
    exe = installed("codex")
    with codex_home() as home:
        drive_codex(exe, home, tmp_path, daemon_factory)


def drive_codex(exe, codex_home, tmp_path, daemon_factory) -> None:
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    configure(ws, [codex_level(exe)], transient_backoff=0.0)
    with FakeOpenAI(honest) as api:
        (codex_home / "config.toml").write_text(PROVIDER.format(url=api.url))
        env = {**GIT_ENV, "OPENAI_API_KEY": KEY, "CODEX_HOME": str(codex_home), "HOME": str(tmp_path)}
        d = daemon_factory(ws.root, env=env).start()
        wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "engine ONLINE\n" + d.output())
        try:
            code, out, err = finish(send(tmp_path, ONE, url))
            assert code == 0, err + d.output()
            assert "Status: COMPLETED" in out and "Certificate: EXACT" in out
        finally:
            d.signal(signal.SIGTERM)
            d.wait()
    assert remote_file(bare, "out/a.txt") == "hello\n"  # the verified work landed on main
    log = [s for s in remote_log(bare) if not s.startswith("mp-engine: engine ")]  # its start and stop
    assert log[0] == "MP-3.2: COMPLETED" and any(s.startswith("MP-3.2 MT-001: ") for s in log)
    last = json.loads(remote_file(bare, "SYSTEM/RESULT_last.json"))
    commit = last["micro_tasks"][0]["commit"]
    assert git(bare, "log", "-1", "--format=%s", commit).startswith("MP-3.2 MT-001: ")
    # codex got the key the daemon holds out of its own environment, through env_allow
    assert api.calls() and all(c["_auth"] == f"Bearer {KEY}" for c in api.calls())
    assert KEY not in git(bare, "log", "-p", "--all", "--format=%B")  # nothing of it was pushed
