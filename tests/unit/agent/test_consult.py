"""`[diagnose] level` (issue #34): an agent's root cause and fix beside the engine's own
diagnosis, read-only in the sandbox, marked as not verified; off by default."""

from __future__ import annotations

import json
import re

import pytest

from mp_engine.agent.consult import parse
from mp_engine.config.load import load_config
from mp_engine.core.errors import ConfigError
from mp_engine.execute.sandbox import problem
from mp_engine.pipeline.engine import Engine
from tests.agentutil import configure, level
from tests.conftest import drop, result_field

FAILING = "# MP-4.4 Start the service\n\n```bash\ngrep -q port config/settings.ini\n```\n"
needs_bwrap = pytest.mark.skipif(problem() is not None, reason=f"the sandbox cannot run here: {problem()}")


def set_diagnose(ws, key: str, value: object) -> None:
    text = ws.config_file.read_text()
    head, _, rest = text.partition("[diagnose]\n")
    rest = re.sub(rf"(?m)^{key} = .*$", f"{key} = {json.dumps(value)}", rest, count=1)
    ws.config_file.write_text(head + "[diagnose]\n" + rest)


def engine(ws, monkeypatch, **diagnose) -> Engine:
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    configure(ws, [level("diagnoser", "diagnoser.py")])
    for key, value in diagnose.items():  # the template's [diagnose] section, set
        set_diagnose(ws, key, value)
    (ws.root / "config").mkdir()
    (ws.root / "config/settings.ini").write_text("host = example\n")
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def test_the_block_is_read_only_under_the_calls_nonce():
    said = '<diagnosis nonce="n1">ROOT CAUSE: old</diagnosis>\n<diagnosis nonce="n2">\nROOT CAUSE: the port\nis missing.\nFIX: add it.\n</diagnosis>'
    assert parse(said, "n2") == ("the port is missing.", "add it.")
    assert parse(said, "n3") is None and parse('<diagnosis nonce="n2">FIX: only a fix</diagnosis>', "n2") is None


@needs_bwrap
def test_a_failure_gets_the_agents_suggestion_beside_the_engines_facts(ws, monkeypatch):
    eng = engine(ws, monkeypatch, level="diagnoser", timeout=30)
    drop(ws, FAILING)
    assert eng.tick().action == "error"
    text = ws.result_file.read_text()
    assert result_field(ws, "Error-Kind") == "nonzero_exit"  # the engine's own diagnosis stands, first
    assert "## Agent's suggestion (not verified)" in text
    assert text.index("## Error") < text.index("## Agent's suggestion")
    assert "- Root cause: the step reads config/settings.ini, which says 'host = example', but it needs a port." in text
    assert "- Fix: add `port = 8080` to config/settings.ini." in text
    last = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert last["suggestion"]["level"] == "diagnoser" and last["suggestion"]["fix"].startswith("add `port")
    assert not (ws.root / "diagnoser-was-here.txt").exists()  # read-only: the write was refused
    (run,) = ws.runs_dir.glob("*MP-4.4")
    said = (run / "agent/DIAGNOSE/iter-001/stdout.txt").read_text()
    assert "writing: REFUSED" in said and (run / "agent/DIAGNOSE/iter-001/manifest.json").exists()


def test_off_by_default_and_a_level_that_does_not_exist_is_refused(ws, monkeypatch):
    eng = engine(ws, monkeypatch)
    drop(ws, FAILING)
    assert eng.tick().action == "error"
    assert "Agent's suggestion" not in ws.result_file.read_text()
    set_diagnose(ws, "level", "nobody")
    with pytest.raises(ConfigError, match=r"\[diagnose\] level = 'nobody' is not one of the \[agent\] levels"):
        load_config(ws.root)
