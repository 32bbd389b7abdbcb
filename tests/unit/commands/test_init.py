"""`mp-engine init`: a local workspace, or one whose channel is a git remote."""

from __future__ import annotations

from mp_engine.commands.init import init
from mp_engine.core.exitcodes import ExitCode
from tests.gitutil import make_remote, remote_file


def test_init_lays_out_a_workspace_once(tmp_path):
    lines: list[str] = []
    assert init(tmp_path / "w", None, "main", lines.append) == ExitCode.OK
    assert lines[0].startswith("initialised mp-engine workspace") and "  created SESSION_STATE.json" in lines
    again: list[str] = []
    init(tmp_path / "w", None, "main", again.append)
    assert again == [f"{(tmp_path / 'w').resolve()} is already an mp-engine workspace; nothing changed"]


def test_init_with_a_remote_pushes_the_layout(tmp_path):
    bare = make_remote(tmp_path)
    lines: list[str] = []
    assert init(tmp_path / "w", f"file://{bare}", "main", lines.append) == ExitCode.OK
    assert f"cloned file://{bare}" in lines and "pushed main to file://" + str(bare) in lines
    assert remote_file(bare, "SESSION_STATE.json") is not None


def test_init_agent_turns_the_sandbox_on_where_it_works(tmp_path, monkeypatch):
    import mp_engine.commands.init as init_module
    from mp_engine.config.load import load_config

    said: list[str] = []
    monkeypatch.setattr(init_module, "sandbox_problem", lambda: None)
    assert init(tmp_path / "w", None, "main", said.append, agents=["claude"]) == ExitCode.OK
    cfg = load_config(tmp_path / "w").agent
    assert cfg.sandbox == "os" and cfg.levels[0].sandbox_allow_hosts == ("api.anthropic.com:443",)
    assert any("agents run in the sandbox" in line for line in said)
    monkeypatch.setattr(init_module, "sandbox_problem", lambda: "bubblewrap (`bwrap`) is not installed")
    said.clear()
    assert init(tmp_path / "v", None, "main", said.append, agents=["codex"]) == ExitCode.OK
    assert load_config(tmp_path / "v").agent.sandbox == "none"
    assert any("agents run unsandboxed: bubblewrap" in line for line in said)
