"""What every command that needs a workspace does first."""

from __future__ import annotations

import pytest

from mp_engine.config.load import load_workspace
from mp_engine.core.errors import ConfigError, WorkspaceError


def test_load_checks_the_workspace_and_the_whole_configuration(ws, tmp_path):
    loaded, config = load_workspace(ws.root)
    assert loaded.root == ws.root and config.engine.poll_interval > 0
    with pytest.raises(WorkspaceError, match="mp-engine init"):
        load_workspace(tmp_path / "not-a-workspace")
    ws.config_file.write_text('[git]\nenabled = "maybe"\n')
    with pytest.raises(ConfigError, match="git.enabled"):
        load_workspace(ws.root)


def test_a_syntax_error_in_the_configuration_names_the_line_and_the_fix(ws):
    ws.config_file.write_text("[engine]\npoll_interval = = 2\n")
    with pytest.raises(ConfigError) as e:
        load_workspace(ws.root)
    assert "is not valid TOML" in str(e.value) and "line 2" in str(e.value) and "mp-engine init" in str(e.value)


def test_a_relative_root_is_resolved_from_the_working_directory(ws, monkeypatch):
    monkeypatch.chdir(ws.root.parent)
    loaded, _ = load_workspace(ws.root.name)
    assert loaded.root == ws.root
