"""The presets `mp-engine init --agent` writes are the levels docs/AGENT.md gives, and
`doctor` tells which installed CLI versions the conformance suite passed on."""

from __future__ import annotations

import re
import tomllib

import pytest

from mp_engine.agent.call.presets import CONFORMANCE, PRESETS, chain, cli_of, installed_version
from mp_engine.config.agent import AgentConfig
from tests.conftest import REPO_ROOT


def docs_levels() -> dict[str, dict]:
    docs = (REPO_ROOT / "docs" / "AGENT.md").read_text()
    blocks = [tomllib.loads(b) for b in re.findall(r"```toml\n(.*?)```", docs, re.S)]
    out: dict[str, dict] = {}
    for block in blocks:
        for lv in block.get("agent", {}).get("levels", []):
            out.setdefault(lv["name"], lv)
    return out


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_is_the_level_the_docs_give(name):
    assert tomllib.loads(PRESETS[name])["agent"]["levels"][0] == docs_levels()[name]


def test_a_chain_ends_with_a_hard_gate_and_is_a_valid_configuration():
    levels = tomllib.loads(chain(["aider", "claude"]))["agent"]["levels"]
    assert [lv["name"] for lv in levels] == ["aider", "claude", "person"] and levels[-1]["hard_gate"] is True
    assert len(AgentConfig.model_validate({"levels": levels}).levels) == 3
    with pytest.raises(ValueError, match="no agent preset gemini"):
        chain(["gemini"])


def test_which_cli_an_argv_runs_and_what_version_it_says(tmp_path):
    assert cli_of("/usr/local/bin/claude") == "claude" and cli_of("claude.exe") == "claude"
    assert cli_of("my-agent.sh") is None
    fake = tmp_path / "codex"
    fake.write_text("#!/bin/sh\necho 'codex-cli 0.169.0'\n")
    fake.chmod(0o755)
    assert installed_version(str(fake)) == "0.169.0"
    assert installed_version(str(tmp_path / "missing")) is None
    from tests.conformance.clis import PINNED

    assert CONFORMANCE == {cli: (pin[2],) for cli, pin in PINNED.items()}  # the versions the suite pins


def test_codex_temp_is_codex_own_test_of_a_temporary_directory(tmp_path, monkeypatch):
    from pathlib import Path

    from mp_engine.agent.call.presets import codex_temp

    monkeypatch.delenv("TMPDIR", raising=False)
    assert codex_temp(Path("/tmp/codex-home")) == Path("/tmp").resolve()
    assert codex_temp(Path("/var/tmp/codex-home")) is None and codex_temp(Path("/home/someone/.codex")) is None
    monkeypatch.setenv("TMPDIR", "/var/tmp")
    assert codex_temp(Path("/var/tmp/codex-home")) == Path("/var/tmp") and codex_temp(Path("/tmp/x")) is None
