"""Where a level's CLI is configured to connect (issue #44): the endpoint the sandbox allows
besides the preset's hosts, from what the operator configured; what the workspace says is
only named; the files the engine read it from are kept read-only in the sandbox."""

from __future__ import annotations

import json
import tomllib

import pytest

from mp_engine.agent.call.endpoints import Endpoint, host_port, reach
from mp_engine.agent.call.presets import PRESETS
from mp_engine.config.agent import AgentLevel


def preset(name: str) -> AgentLevel:
    return AgentLevel(**tomllib.loads(PRESETS[name])["agent"]["levels"][0])


@pytest.mark.parametrize(
    "url, default, expected",
    [
        ("https://gateway.example/v1", None, "gateway.example:443"),
        ("http://127.0.0.1:4000", None, "127.0.0.1:4000"),
        ("http://proxy.corp:3128/", None, "proxy.corp:3128"),
        ("http://[::1]:8080/v1", None, "[::1]:8080"),
        ("127.0.0.1:11434", 11434, "127.0.0.1:11434"),
        ("ollama.lan", 11434, "ollama.lan:11434"),
        ("not a url", None, None),
        ("https://", None, None),
        ("http://host:notaport", None, None),
    ],
)
def test_a_url_is_the_host_and_port_it_connects_to(url, default, expected):
    assert host_port(url, default) == expected


def test_a_base_url_passed_through_env_allow_is_the_endpoint(tmp_path):
    """What the call's (scrubbed) environment carries: the preset passes ANTHROPIC_BASE_URL
    through; a proxy too, when the level passes it."""
    env = {"HOME": str(tmp_path), "ANTHROPIC_BASE_URL": "https://gw.corp:8443", "HTTPS_PROXY": "http://px:3128"}
    found = reach(preset("claude"), env, tmp_path)
    assert found.allowed() == ["gw.corp:8443", "px:3128"]
    assert found.endpoints[0] == Endpoint(
        "gw.corp:8443", "ANTHROPIC_BASE_URL (the daemon's environment, passed through env_allow)"
    )
    assert reach(preset("claude"), {"HOME": str(tmp_path)}, tmp_path).endpoints == ()
    aider = reach(preset("aider"), {"HOME": str(tmp_path), "OPENAI_API_BASE": "http://127.0.0.1:4000/v1"}, tmp_path)
    assert aider.allowed() == ["127.0.0.1:4000"] and aider.protected == ()


def test_codexs_provider_base_url_and_its_config_kept_read_only(tmp_path):
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "gw"\nprofile = "work"\n'
        '[model_providers.gw]\nbase_url = "http://gw.lan:8080/v1"\n'
        '[model_providers.corp]\nbase_url = "https://corp.example/openai"\n'
        '[profiles.work]\nmodel_provider = "corp"\n'
    )
    found = reach(preset("codex"), {"HOME": str(tmp_path), "CODEX_HOME": str(home)}, tmp_path)
    assert found.allowed() == ["corp.example:443"]  # the profile's provider wins
    assert "model_providers.corp.base_url" in found.endpoints[0].source
    assert found.protected == (home / "config.toml",)
    # Without CODEX_HOME: ~/.codex; no provider of its own: codex's default (the preset's hosts).
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('model = "gpt-5"\n')
    default = reach(preset("codex"), {"HOME": str(tmp_path)}, tmp_path)
    assert default.endpoints == () and default.protected == (tmp_path / ".codex" / "config.toml",)
    (tmp_path / ".codex" / "config.toml").write_text("not = [toml")
    assert reach(preset("codex"), {"HOME": str(tmp_path)}, tmp_path).endpoints == ()
    # The level's argv overrides the file as codex reads them (a profile still wins over a
    # top-level key): `--profile NAME`, `-c key=value`.
    (home / "config.toml").write_text(
        '[model_providers.gw]\nbase_url = "http://gw.lan:8080"\n[profiles.work]\nmodel_provider = "gw"\n'
    )
    env = {"HOME": str(tmp_path), "CODEX_HOME": str(home)}
    work = preset("codex").model_copy(update={"argv": ("codex", "exec", "--profile", "work", "-")})
    assert reach(work, env, tmp_path).allowed() == ["gw.lan:8080"]
    px = ("-c", 'model_providers.px.base_url="http://px.lan:9000/v1"', "-c", "model_provider=px")
    over = preset("codex").model_copy(update={"argv": ("codex", "exec", *px, "-")})
    found = reach(over, env, tmp_path)
    assert found.allowed() == ["px.lan:9000"] and found.endpoints[0].source.startswith("the level's argv"), found


def test_claudes_user_settings_are_the_operators_and_the_projects_only_named(tmp_path):
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "http://gw:9000"}}))
    work = tmp_path / "work"
    (work / ".claude").mkdir(parents=True)
    (work / ".claude" / "settings.json").write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://evil.example"}}))
    found = reach(preset("claude"), {"HOME": str(tmp_path)}, work)
    assert found.allowed() == ["gw:9000"] and found.protected == (tmp_path / ".claude" / "settings.json",)
    assert [(e.host, e.trusted) for e in found.named()] == [("evil.example:443", False)]
    assert str(work / ".claude" / "settings.json") in found.named()[0].source


def test_aiders_dotenv_in_the_workspace_is_named_and_its_argv_option_allowed(tmp_path):
    (tmp_path / ".env").write_text("# the model\nexport OPENAI_API_BASE='http://10.0.0.9:4000/v1'\nOTHER=1\n")
    level = preset("aider").model_copy(update={"argv": (*preset("aider").argv, "--openai-api-base=http://lite:4000")})
    found = reach(level, {"HOME": str(tmp_path)}, tmp_path)
    assert found.allowed() == ["lite:4000"]
    assert [e.host for e in found.named()] == ["10.0.0.9:4000"] and ".env" in found.named()[0].source
    other = AgentLevel(name="x", argv=("my-agent", "{prompt_file}"))
    assert reach(other, {"HOME": str(tmp_path)}, tmp_path).endpoints == ()  # a CLI the engine does not know


def test_claudes_managed_settings_are_read_first(tmp_path, monkeypatch):
    import mp_engine.agent.call.endpoints as endpoints

    managed = tmp_path / "managed-settings.json"
    managed.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://llm.corp.example"}}))
    monkeypatch.setattr(endpoints, "CLAUDE_MANAGED", managed)
    found = reach(preset("claude"), {"HOME": str(tmp_path / "home")}, tmp_path)
    assert found.allowed() == ["llm.corp.example:443"] and str(managed) in found.endpoints[0].source
