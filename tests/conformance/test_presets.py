"""Conformance: each preset as a user gets it (issue #44). `mp-engine init --agent NAME`
writes the level and `sandbox = "os"`; the user points the CLI at a gateway or proxy the way
that CLI is configured (claude: `ANTHROPIC_BASE_URL` in the daemon's environment; codex: a
provider's `base_url` in `$CODEX_HOME/config.toml`; aider: `OPENAI_API_BASE`), here the
fake model server; the engine's user has no git identity (a service user's HOME, no
global config). Each row runs the real CLI through `Engine.tick()`.

- The endpoint the level is configured to use is allowed without a `sandbox_allow_hosts`
  entry, and the agent finds the engine's git identity: the work lands EXACT.
- An endpoint only the workspace names (claude's project settings; aider's `.env` likewise,
  tested without the CLI: anyone's who can push an MP) is never opened: BLOCKED
  `agent_unreachable`, the host named, and the one fix (add it to `sandbox_allow_hosts`).
- A configured endpoint that is down: the engine host's own error, the host named, an
  outage (codex, which would wait for the network forever, is stopped).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.agentutil import ONE, only_run, records
from tests.conformance import fakemodel as fm
from tests.conformance.clis import codex_home, installed
from tests.conformance.fakeopenai import FakeOpenAI
from tests.conformance.harness import assert_sandboxed_exact, init_agent, needs_sandbox, tick
from tests.conformance.test_aider import honest as aider_honest
from tests.conformance.test_claude import honest as claude_honest
from tests.conformance.test_codex import PROVIDER
from tests.conformance.test_codex import honest as codex_honest
from tests.conftest import result_field
from tests.gitutil import git

pytestmark = pytest.mark.conformance


@dataclass(frozen=True)
class Cli:
    """How a user points one CLI at an endpoint, and the fake model server it talks to."""

    name: str
    server: type[fm.FakeServer]
    honest: fm.Scenario
    env: dict[str, str]
    point: Callable[[pytest.MonkeyPatch, Path, str], None]  # (monkeypatch, CODEX_HOME, base URL)


def _claude(mp: pytest.MonkeyPatch, codex: Path, url: str) -> None:
    mp.setenv("ANTHROPIC_BASE_URL", url)  # the preset passes it through (env_allow)


def _codex(mp: pytest.MonkeyPatch, codex: Path, url: str) -> None:
    (codex / "config.toml").write_text(PROVIDER.format(url=url))


def _aider(mp: pytest.MonkeyPatch, codex: Path, url: str) -> None:
    mp.setenv("OPENAI_API_BASE", url + "/v1")


CLIS = {
    "claude": Cli("claude", fm.FakeAnthropic, claude_honest, {"ANTHROPIC_API_KEY": "sk-ant-conformance-0"}, _claude),
    "codex": Cli("codex", FakeOpenAI, codex_honest, {"OPENAI_API_KEY": "sk-conformance-0"}, _codex),
    "aider": Cli(
        "aider", FakeOpenAI, aider_honest, {"OPENAI_API_KEY": "sk-conformance-0", "AIDER_MODEL": "openai/fake"}, _aider
    ),
}


@pytest.fixture
def service_user(tmp_path, monkeypatch):
    """The engine's user as a service account has it: a HOME with no git configuration
    (and none given through GIT_CONFIG_GLOBAL), and the CLI's key in the daemon's environment."""
    needs_sandbox()
    home = tmp_path / "service-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    with codex_home() as codex:
        monkeypatch.setenv("CODEX_HOME", str(codex))
        yield codex


def run_preset(ws, monkeypatch, codex: Path, cli: Cli, scenario: fm.Scenario, *, url: str | None = None, **over: Any):
    """One MP with the preset `init --agent` writes; `url` (default: the fake server's) is
    where the user points the CLI. Returns the tick's result and the fake server."""
    exe = installed(cli.name)
    for k, v in cli.env.items():
        monkeypatch.setenv(k, v)
    with cli.server(scenario) as api:
        cli.point(monkeypatch, codex, url or api.url)
        init_agent(ws, cli.name, exe, transient_backoff=0.0, **over)
        return tick(ws, ONE), api


@pytest.mark.parametrize("name", list(CLIS))
def test_the_preset_reaches_its_configured_endpoint_and_commits_without_a_git_identity(
    name, ws, service_user, monkeypatch
):
    """Before issue #44 the sandbox refused the endpoint (claude: a crash, then the hard gate;
    codex: a hang to the call timeout; aider: a crash on the read-only .git/config)."""
    cli = CLIS[name]
    result, api = run_preset(ws, monkeypatch, service_user, cli, cli.honest, level={"timeout": 240.0})
    assert_sandboxed_exact(ws, result, api.url, configured=True)
    evidence = only_run(ws).dir / records(only_run(ws))[0]["evidence"]
    rules = json.loads((evidence / "sandbox.json").read_text())
    assert urlsplit(api.url).netloc in rules["endpoints"], rules
    assert rules["git_identity"] == "mp-engine <mp-engine@localhost>"
    assert "user" not in git(ws.root, "config", "--list", "--local")  # no identity written into the repository


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_endpoint_only_the_workspace_names_ends_blocked_with_the_host_and_the_fix(ws, service_user, monkeypatch):
    """claude reads `env` from the workspace's `.claude/settings.json` (aider reads `.env`,
    test_endpoints.py and test_network.py): an MP could point it anywhere, so the sandbox
    never opens what that says. The call ends `agent_unreachable` (not a crash, then the hard
    gate), naming the host and the file, and the fix."""
    cli = CLIS["claude"]
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")  # one attempt: claude retries for three minutes
    env_allow = ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_MAX_RETRIES"]
    with cli.server(cli.honest) as api:
        (ws.root / ".claude").mkdir()
        (ws.root / ".claude" / "settings.json").write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": api.url}}))
        for k, v in cli.env.items():
            monkeypatch.setenv(k, v)
        init_agent(ws, "claude", installed("claude"), level={"env_allow": env_allow}, transient_backoff=0.0)
        assert tick(ws, ONE).action == "error"
        assert api.calls() == []  # it never got through
    text = ws.result_file.read_text()
    host = urlsplit(api.url).netloc
    assert result_field(ws, "Certificate") == "BLOCKED" and result_field(ws, "Error-Kind") == "agent_unreachable", text
    assert f"Add `{host}` to `sandbox_allow_hosts` of level 'claude'" in text and ".claude/settings.json" in text, text
    call = records(only_run(ws))[0]["call"]
    assert call["kind"] == "unreachable" and call["host"] == host


def test_a_configured_endpoint_that_is_down_is_an_outage_naming_the_host_and_codex_stops_waiting(
    ws, service_user, monkeypatch
):
    """codex's provider points at a gateway that refuses: codex would print "Reconnecting...
    waiting for network" until the call timeout. The engine stops it, and the outage it
    records names the host and the engine host's own error."""
    host = f"127.0.0.1:{_closed_port()}"
    result, _ = run_preset(
        ws,
        monkeypatch,
        service_user,
        CLIS["codex"],
        codex_honest,
        url=f"http://{host}",
        level={"timeout": 240.0},
        transient_retries=0,
    )
    text = ws.result_file.read_text()
    assert result_field(ws, "Error-Kind") == "agent_unavailable", text
    call = records(only_run(ws))[0]["call"]
    assert call["kind"] == "transient" and host in call["detail"] and "refused" in call["detail"].lower(), call
    assert call["duration"] < 120, call  # not the preset's 1200 s timeout
