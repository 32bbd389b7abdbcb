"""`mp-engine init` as a user runs it."""

from __future__ import annotations

import json

from tests.e2e.cli import mpe
from tests.gitutil import make_remote, remote_file


def test_init_lays_out_a_workspace_and_is_idempotent(tmp_path):
    r = mpe("init", str(tmp_path / "ws"))
    assert r.returncode == 0 and r.stderr == ""
    assert "created SESSION_STATE.json" in r.stdout and "created Claude_Inbox/" in r.stdout
    state = json.loads((tmp_path / "ws" / "SESSION_STATE.json").read_text())
    assert state["status"] == "OFFLINE" and state["current"] == "IDLE"
    again = mpe("init", str(tmp_path / "ws"))
    assert again.returncode == 0 and "nothing changed" in again.stdout


def test_init_with_a_remote_clones_enables_git_and_pushes(tmp_path):
    bare = make_remote(tmp_path)
    r = mpe("init", "--remote", f"file://{bare}", str(tmp_path / "ws"))
    assert r.returncode == 0, r.stderr
    assert "enabled [git] in mp-engine.toml (remote origin, branch main)" in r.stdout
    assert json.loads(remote_file(bare, "SESSION_STATE.json"))["current"] == "IDLE"


def test_init_with_an_unreachable_remote_says_what_failed(tmp_path):
    r = mpe("init", "--remote", str(tmp_path / "missing.git"), str(tmp_path / "ws"))
    assert r.returncode == 1 and r.stdout == ""
    assert "git clone" in r.stderr and "does not exist" in r.stderr


def test_init_with_agents_writes_the_documented_chain_once(tmp_path):
    from mp_engine.config.load import load_config

    ws = tmp_path / "ws"
    r = mpe("init", "--agent", "aider", "--agent", "claude", str(ws))
    assert r.returncode == 0, r.stderr
    assert "added the agent chain aider -> claude -> person (hard gate)" in r.stdout
    levels = load_config(ws).agent.levels
    assert [lv.name for lv in levels] == ["aider", "claude", "person"] and levels[-1].hard_gate
    assert levels[1].stdin and "--allowedTools" in levels[1].argv
    assert load_config(ws).agent.max_parallel == 3  # agents mostly wait on a model: a few at once
    again = mpe("init", "--agent", "codex", str(ws))  # a chain is there: left as it is
    assert again.returncode == 0 and "already has [[agent.levels]]" in again.stdout
    assert [lv.name for lv in load_config(ws).agent.levels] == ["aider", "claude", "person"]
    wrong = mpe("init", "--agent", "gemini", str(tmp_path / "other"))
    assert wrong.returncode == 2 and "no agent preset gemini" in wrong.stdout


def test_init_agent_without_a_name_lists_the_presets_and_writes_nothing(tmp_path):
    # issue #44: click said only "Option '--agent' requires an argument".
    for args in ([str(tmp_path / "ws"), "--agent"], ["--agent", "--agent", "claude", str(tmp_path / "ws")]):
        r = mpe("init", *args, env={"HOME": str(tmp_path)})
        assert r.returncode == 2 and "--agent needs a name" in r.stdout, r
        assert all(f"  {name} " in r.stdout for name in ("claude", "codex", "aider", "ollama"))
        assert "runs `codex exec`" in r.stdout and "mp-engine init --agent aider --agent claude DIR" in r.stdout
    assert not (tmp_path / "ws").exists()
