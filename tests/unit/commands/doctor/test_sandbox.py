"""`doctor`'s sandbox checks: the probe run for real, the warning for agents left
unsandboxed where bubblewrap works, the refusal where it cannot, and codex's CODEX_HOME
under /tmp on a host with a system bwrap."""

from __future__ import annotations

import pytest

import mp_engine.commands.doctor.sandbox as checks
from mp_engine.commands.doctor.check import FAIL, OK, WARN
from mp_engine.config.load import load_config
from mp_engine.execute.sandbox import problem
from tests.agentutil import configure, level

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
