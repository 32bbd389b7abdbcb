"""Configuration: mp-engine.toml, environment overrides, and errors that name the key."""

from __future__ import annotations

import pytest

from mp_engine.config.load import Config, load_config
from mp_engine.core.errors import ConfigError
from mp_engine.core.workspace import config_template


def test_template_is_the_defaults(tmp_path):
    (tmp_path / "mp-engine.toml").write_text(config_template())
    assert load_config(tmp_path, environ={}) == Config()


def test_missing_file_means_defaults(tmp_path):
    assert load_config(tmp_path, environ={}) == Config()


def test_environment_overrides_are_typed(tmp_path):
    cfg = load_config(
        tmp_path,
        environ={
            "MP_ENGINE_EXECUTION__STEP_TIMEOUT": "12.5",
            "MP_ENGINE_EXECUTION__ENV_ALLOW": '["CI", "TOKEN_NAME"]',
            "MP_ENGINE_WATCH__MODE": "polling",
            "MP_ENGINE_ROOT": "/ignored/not/a/section",
        },
    )
    assert cfg.execution.step_timeout == 12.5
    assert cfg.execution.env_allow == ("CI", "TOKEN_NAME")
    assert cfg.watch.mode == "polling"


def test_unknown_key_names_the_key_and_the_known_ones(tmp_path):
    (tmp_path / "mp-engine.toml").write_text("[engine]\npoll_intervall = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={})
    msg = str(info.value)
    assert "engine.poll_intervall: unknown key" in msg
    assert "poll_interval" in msg and "settle_seconds" in msg


def test_bad_value_from_environment_names_the_variable(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={"MP_ENGINE_ENGINE__LOCK_TIMEOUT": "-1"})
    assert "engine.lock_timeout" in str(info.value)
    assert "MP_ENGINE_ENGINE__LOCK_TIMEOUT" in str(info.value)


def test_invalid_toml_says_how_to_fix(tmp_path):
    (tmp_path / "mp-engine.toml").write_text("[engine\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path, environ={})


def test_an_agent_chain_is_checked_as_a_whole(tmp_path):
    def chain(levels: str) -> str:
        return f"[agent]\n{levels}"

    ok = '[[agent.levels]]\nname = "a"\nargv = ["a", "{prompt_file}"]\n'
    gate = '[[agent.levels]]\nname = "human"\nhard_gate = true\n'
    for text, message in [
        (ok + ok, "level names must be unique"),
        (gate + ok.replace('"a"', '"b"', 1), "hard_gate is allowed only once, as the last level"),
        (gate, "at least one agent level before the hard gate"),
        ('[[agent.levels]]\nname = "x"\nargv = ["x"]\n', "never passes the prompt"),
        ('[[agent.levels]]\nname = "x"\n', "has no argv"),
    ]:
        (tmp_path / "mp-engine.toml").write_text(chain(text))
        with pytest.raises(ConfigError, match=message):
            load_config(tmp_path)
    (tmp_path / "mp-engine.toml").write_text(chain(ok + gate))
    assert [lv.name for lv in load_config(tmp_path).agent.levels] == ["a", "human"]


def test_routes_are_chains_of_their_own_checked_like_the_default(tmp_path):
    level = '[[agent.routes.levels]]\nname = "a"\nargv = ["a", "{prompt_file}"]\n'
    gate = '[[agent.routes.levels]]\nname = "human"\nhard_gate = true\n'
    route = '[[agent.routes]]\ndomain = "docs"\n'
    for text, message in [
        (route + gate + level.replace('"a"', '"b"', 1), "route 'docs': hard_gate is allowed only once"),
        (route, "levels"),
        (route + level + route + level, "route domains must be unique"),
        ('[[agent.routes]]\ndomain = "no spaces"\n' + level, "domain"),
    ]:
        (tmp_path / "mp-engine.toml").write_text("[agent]\n" + text)
        with pytest.raises(ConfigError, match=message):
            load_config(tmp_path)
    (tmp_path / "mp-engine.toml").write_text("[agent]\n" + route + level + gate)
    routes = load_config(tmp_path).agent.routes
    assert routes[0].domain == "docs" and [lv.name for lv in routes[0].levels] == ["a", "human"]


def test_this_repositorys_own_workspace_runs_with_git_off():
    """`make run` serves this repository's own Claude_Inbox/; git sync stays off until a
    remote is configured (README, quick start)."""
    from tests.conftest import REPO_ROOT

    config = load_config(REPO_ROOT)
    assert config.git.enabled is False and config.execution.executor == "shell"


def test_the_planner_and_the_reflector_are_levels_that_call_an_agent(tmp_path):
    (tmp_path / "mp-engine.toml").write_text(
        '[agent]\nplan = "auto"\nmax_replans = 1\n[agent.planner]\nname = "p"\nargv = ["p", "{prompt_file}"]\n'
    )
    cfg = load_config(tmp_path).agent
    assert cfg.plan == "auto" and cfg.max_replans == 1 and cfg.planner.name == "p" and cfg.reflector is None
    for text, message in [
        ('[agent.planner]\nname = "p"\nhard_gate = true\n', r"\[agent.planner\] must call an agent"),
        ('[agent.reflector]\nname = "r"\nargv = ["r"]\n', "never passes the prompt"),
        ('plan = "sometimes"\n', "plan"),
    ]:
        (tmp_path / "mp-engine.toml").write_text("[agent]\n" + text)
        with pytest.raises(ConfigError, match=message):
            load_config(tmp_path)


def test_the_dashboard_is_off_by_default_and_its_address_is_checked(ws, monkeypatch):
    from mp_engine.config.dashboard import DashboardConfig

    assert load_config(ws.root).dashboard.listen == ""
    monkeypatch.setenv("MP_ENGINE_DASHBOARD__LISTEN", "127.0.0.1:0")
    cfg = load_config(ws.root).dashboard
    assert cfg.address == ("127.0.0.1", 0) and cfg.token_env == "MP_ENGINE_DASHBOARD_TOKEN"
    assert DashboardConfig(listen="[::1]:8470").address == ("::1", 8470)
    monkeypatch.setenv("MP_ENGINE_DASHBOARD__LISTEN", "localhost")
    with pytest.raises(ConfigError, match=r"dashboard.*listen must be HOST:PORT"):
        load_config(ws.root)
