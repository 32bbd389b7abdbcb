"""`doctor`'s sandbox checks: the probe run for real, the warning for agents left
unsandboxed where bubblewrap works, the refusal where it cannot, the endpoint each sandboxed
level is configured to use, and codex's CODEX_HOME under /tmp on a host with a system bwrap."""

from __future__ import annotations

import socket

import pytest

import mp_engine.commands.doctor.sandbox as checks
from mp_engine.commands.doctor.check import FAIL, OK, WARN
from mp_engine.config.load import load_config
from mp_engine.execute.sandbox import problem
from tests.agentutil import configure, level
from tests.netutil import TcpServer

needs_bwrap = pytest.mark.skipif(problem() is not None, reason=f"the sandbox cannot run here: {problem()}")


@needs_bwrap
def test_the_probe_runs_for_real_and_the_rules_are_said(ws):
    configure(ws, [level("a", "good.py", sandbox_allow_hosts=["api.a.test:443"])], sandbox="os")
    c = checks.sandbox(ws, load_config(ws.root))
    assert c.level == OK and "a probe could not read a hidden file" in c.message and "api.a.test:443" in c.message
    assert checks.probe() is None


@needs_bwrap
def test_agents_left_unsandboxed_where_it_works_are_a_warning(ws):
    configure(ws, [level("a", "good.py")])
    c = checks.sandbox(ws, load_config(ws.root))
    assert c.level == WARN and 'sandbox = "os"' in c.fix


def test_a_sandbox_that_cannot_run_fails_with_the_fix(ws, monkeypatch):
    configure(ws, [level("a", "good.py")], sandbox="os")
    monkeypatch.setattr(checks, "problem", lambda: "bubblewrap (`bwrap`) is not installed: apt install bubblewrap")
    c = checks.sandbox(ws, load_config(ws.root))
    assert c.level == FAIL and "apt install bubblewrap" in c.message


def test_codex_home_under_tmp_with_a_system_bwrap_fails(ws, tmp_path, monkeypatch):
    configure(ws, [{"name": "codex", "argv": ["codex", "exec", "-"], "stdin": True}])
    config = load_config(ws.root)
    monkeypatch.setattr(checks.shutil, "which", lambda name: "/usr/bin/bwrap")
    monkeypatch.setenv("CODEX_HOME", "/tmp/codex-home")
    c = checks.codex_home(ws, config)
    assert c.level == FAIL and "outside /tmp" in c.fix
    monkeypatch.setenv("CODEX_HOME", str(ws.root / "codex-home").replace("/tmp/", "/srv/"))
    assert checks.codex_home(ws, config).level == OK
    configure(ws, [level("a", "good.py")])
    assert checks.codex_home(ws, load_config(ws.root)).message == "no codex level"


def test_the_endpoint_a_sandboxed_level_is_configured_with_must_answer(ws, monkeypatch):
    """issue #44: the sandbox allows the endpoint a level is configured to use; doctor says
    which, connects to it, and fails with the host and where it was set when it is down."""
    gateway = TcpServer()
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{gateway.port}/v1")
    lv = level("aider", "good.py", env_allow=["OPENAI_API_BASE"], sandbox_allow_hosts=["api.openai.com:443"])
    configure(ws, [lv, level("b", "good.py")], sandbox="os")
    c = checks.endpoints(ws, load_config(ws.root))
    assert c.level == OK and f"aider to 127.0.0.1:{gateway.port} (OPENAI_API_BASE)" in c.message, c
    assert "b to its default API (no host)" in c.message
    gateway.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{closed}/v1")  # a gateway that is down
    down = checks.endpoints(ws, load_config(ws.root))
    assert down.level == FAIL and f"127.0.0.1:{closed} (OPENAI_API_BASE" in down.message, down
    assert "does not answer" in down.message and "correct the URL" in down.fix
    configure(ws, [lv])
    assert checks.endpoints(ws, load_config(ws.root)).message == "no level runs in the sandbox"


def test_an_endpoint_only_the_workspace_names_is_a_warning(ws, monkeypatch):
    (ws.root / ".claude").mkdir()
    (ws.root / ".claude" / "settings.json").write_text('{"env": {"ANTHROPIC_BASE_URL": "https://gw.example"}}')
    configure(ws, [{"name": "claude", "argv": ["claude", "-p"], "stdin": True}], sandbox="os")
    c = checks.endpoints(ws, load_config(ws.root))
    assert c.level == WARN and "points it at gw.example:443, which the sandbox does not open" in c.message, c
    assert "agent_unreachable" in c.message and "sandbox_allow_hosts" in c.fix
