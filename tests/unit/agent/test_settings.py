"""An agent MP's own settings (Max-Iterations:, Levels:, Wall-Budget:, Max-Cost-USD:): each
changes the run as documented, a bad one is refused before the run with its fix, and a
ceiling the operator set holds."""

from __future__ import annotations

import pytest

from mp_engine.agent.settings import for_mp
from mp_engine.config.agent import AgentConfig
from mp_engine.core.errors import InvalidMPError
from mp_engine.inbox.mpfile import parse
from mp_engine.record.archive import RunArchive
from tests.agentutil import calls, level, records
from tests.conftest import drop, result_field

CHAIN = [
    {"name": "local", "argv": ["local", "{prompt}"]},
    {"name": "claude", "argv": ["claude", "{prompt}"]},
    {"name": "person", "hard_gate": True},
]


def mp(*headers: str):
    head = "\n".join(headers)
    return parse(
        f"# MP-8.1 Settings\nExecutor: agent\n{head}\n\nDo it.\n\n## Validate\n\n```bash\ntrue\n```\n".encode()
    )


def test_each_header_sets_its_setting_for_this_mp_only():
    cfg = AgentConfig(levels=CHAIN, max_iterations=30, wall_budget=3600)
    assert for_mp(cfg, mp()) is cfg
    got = for_mp(cfg, mp("Max-Iterations: 60", "Wall-Budget: 600", "Max-Cost-USD: 1.5", "Levels: claude, person"))
    assert (got.max_iterations, got.wall_budget, got.max_cost_usd) == (60, 600.0, 1.5)
    assert [lv.name for lv in got.levels] == ["claude", "person"] and cfg.max_iterations == 30


def test_a_ceiling_may_be_lowered_never_raised():
    cfg = AgentConfig(levels=CHAIN, max_iterations=30, max_cost_usd=5.0, ceilings=["max_iterations", "max_cost_usd"])
    assert for_mp(cfg, mp("Max-Iterations: 10", "Max-Cost-USD: 1")).max_iterations == 10
    with pytest.raises(InvalidMPError) as e:
        for_mp(cfg, mp("Max-Iterations: 60"))
    assert "above the operator's ceiling" in e.value.reason and "`Max-Iterations: 30` or less" in e.value.fix
    with pytest.raises(InvalidMPError):
        for_mp(cfg, mp("Max-Cost-USD: 9"))
    assert for_mp(cfg, mp("Wall-Budget: 99999")).wall_budget == 99999  # not a ceiling here


@pytest.mark.parametrize(
    ("levels", "says", "fix"),
    [
        ("gpt", "does not have (it has local, claude, person)", "Levels: local, claude"),
        ("claude, local", "not in the chain's order", "Levels: local, claude"),
        ("person", "keeps no agent level", "at least one agent level"),
    ],
)
def test_levels_must_be_the_chains_own_in_its_order(levels, says, fix):
    with pytest.raises(InvalidMPError) as e:
        for_mp(AgentConfig(levels=CHAIN), mp(f"Levels: {levels}"))
    assert says in e.value.reason and fix in e.value.fix


def test_the_run_uses_only_the_levels_and_iterations_the_mp_names(engine_for, ws, tmp_path):
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    engine = engine_for([level("a", "wrong.py", "--log", str(log_a)), level("b", "good.py", "--log", str(log_b))])
    drop(
        ws,
        '# MP-8.2 Only b\nExecutor: agent\nLevels: b\n\nWrite "hello" to `out/a.txt`.\n\n## Validate\n\n```bash\ngrep -qx hello out/a.txt\n```\n',
    )
    assert engine.tick().action == "completed", ws.result_file.read_text()
    assert calls(log_a) == [] and len(calls(log_b)) == 1
    # One iteration and no more, with an agent that never gets it right.
    drop(
        ws,
        '# MP-8.3 Once\nExecutor: agent\nMax-Iterations: 1\nLevels: a\n\nWrite "hello" to `out/b.txt`.\n\n## Validate\n\n```bash\ngrep -qx hello out/b.txt\n```\n',
    )
    engine.tick()
    assert len(calls(log_a)) == 1 and result_field(ws, "Status") == "ERROR"
    (run,) = [p for p in ws.runs_dir.iterdir() if p.name.endswith("MP-8.3")]
    assert len(records(RunArchive(run))) == 1


def test_a_setting_that_cannot_apply_refuses_the_mp_with_its_fix(engine_for, ws):
    engine = engine_for([level("a", "good.py")], max_iterations=5, ceilings=["max_iterations"])
    drop(
        ws,
        '# MP-8.4 Greedy\nExecutor: agent\nMax-Iterations: 50\n\nWrite "x" to `x.txt`.\n\n## Validate\n\n```bash\ntrue\n```\n',
    )
    engine.tick()
    text = ws.result_file.read_text()
    assert result_field(ws, "Status") == "ERROR" and "invalid_mp" in text and "## Not halted" in text, text
    assert "above the operator's ceiling" in text and "`Max-Iterations: 5` or less" in text
