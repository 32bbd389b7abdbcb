"""The escalation chain's configuration, argv rendering, and the documented examples."""

from __future__ import annotations

import re
import tomllib

import pytest

from mp_engine.agent.call.chain import render_argv
from mp_engine.config.agent import AgentLevel
from mp_engine.config.load import Config, load_config
from mp_engine.core.errors import ConfigError
from tests.conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "AGENT.md"


def test_placeholders_are_replaced_and_other_braces_are_kept():
    level = AgentLevel(
        name="x",
        argv=[
            "tool",
            "-p",
            "{prompt}",
            "--file={prompt_file}",
            "{workspace}/{mt_id}",
            '{"k": 1}',
            "{evidence_dir}/h.md",
        ],
    )
    values = {
        "prompt": "do {it}",
        "prompt_file": "/r/p.md",
        "workspace": "/ws",
        "mt_id": "MT-002",
        "evidence_dir": "/e",
    }
    argv = render_argv(level, values)
    assert argv == ["tool", "-p", "do {it}", "--file=/r/p.md", "/ws/MT-002", '{"k": 1}', "/e/h.md"]


def test_the_default_chain_is_empty():
    assert Config().agent.levels == () and Config().execution.executor == "shell"


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ([{"name": "a", "argv": ["tool"]}], "never passes the prompt"),
        ([{"name": "a"}], "has no argv"),
        ([{"name": "g", "hard_gate": True}, {"name": "a", "argv": ["t", "{prompt}"]}], "only once, as the last level"),
        ([{"name": "g", "hard_gate": True}], "at least one agent level before the hard gate"),
        ([{"name": "a", "argv": ["t", "{prompt}"]}, {"name": "a", "argv": ["u", "{prompt}"]}], "unique"),
    ],
)
def test_an_invalid_chain_is_a_config_error_naming_the_key(tmp_path, levels, message):
    lines = ["[agent]"]
    for lv in levels:
        lines.append("[[agent.levels]]")
        lines += [f"{k} = {'true' if v is True else repr(v).replace(chr(39), chr(34))}" for k, v in lv.items()]
    (tmp_path / "mp-engine.toml").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path, environ={})
    assert "agent" in str(e.value) and message in str(e.value)


def test_stdin_levels_need_no_prompt_placeholder():
    assert AgentLevel(name="ollama", argv=["ollama", "run", "qwen2.5-coder"], stdin=True).stdin


def test_every_toml_example_in_docs_agent_md_is_a_valid_configuration():
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 2
    names = set()
    for block in blocks:
        config = Config.model_validate(tomllib.loads(block))
        names |= {lv.argv[0] for lv in config.agent.levels if lv.argv}
    assert {"claude", "codex", "aider", "ollama"} <= names


def test_levels_are_described_and_recorded_by_name_or_model():
    from mp_engine.agent.call.chain import describe, model_id, runnable
    from mp_engine.config.agent import AgentLevel

    small = AgentLevel(name="small", argv=("ollama", "run", "qwen", "{prompt}"), model="qwen2.5-coder:7b")
    big = AgentLevel(name="claude", argv=("claude", "-p", "{prompt}"))
    gate = AgentLevel(name="human", hard_gate=True)
    chain = (small, big, gate)
    assert describe(chain, 1) == "level 1 (claude)" and describe(chain, 7) == "level 7"
    assert model_id(small) == "qwen2.5-coder:7b" and model_id(big) == "claude"
    assert runnable(chain) == [small, big]
