"""Ledgers recorded by an earlier release (tests/fixtures/ledgers/, recorded at 3ed50d5, before
the agent run became one engine, issue #40) replay to the state they had, record by record,
and the run they belong to resumes where it stopped: a one-at-a-time run and one with tasks at
once, each stopped mid-run by the hourly call limit."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.workspace import Workspace
from mp_engine.pipeline.engine import Engine
from tests.agentutil import calls, configure, level, only_run, progress
from tests.conftest import result_field
from tests.gitutil import git
from tests.unit.agent.run import compat

LEDGERS = Path(__file__).resolve().parents[3] / "fixtures" / "ledgers"


def extract(name: str, into: Path) -> Workspace:
    """The recorded workspace (git repository, run archive, worktrees) at `into`."""
    with tarfile.open(LEDGERS / f"{name}.tar.gz") as tar:
        tar.extractall(into, filter="tar")
    root = into / "ws"
    trees = [p.parent for p in (root / "SYSTEM" / ".engine" / "work").rglob(".git")]
    if trees:  # the worktrees moved with the workspace: git is told where they are now
        git(root, "worktree", "repair", *map(str, trees))
    return Workspace(root)


@pytest.mark.parametrize("name", ["sequential", "parallel"])
def test_a_recorded_ledger_replays_to_the_state_it_had_after_every_record(name, tmp_path):
    ws = extract(name, tmp_path)
    expected = json.loads((LEDGERS / f"{name}.expected.json").read_text())
    got = compat.views(next(p for p in ws.runs_dir.iterdir() if p.is_dir()))
    assert len(got["views"]) == len(expected["views"])
    for n, (mine, theirs) in enumerate(zip(got["views"], expected["views"], strict=True)):
        assert mine == theirs, f"after record {n}"


@pytest.mark.parametrize(
    ("name", "left", "tasks"),
    [
        ("sequential", [("MT-002", 2), ("MT-003", 1)], ["MT-001", "MT-002", "MT-003"]),
        ("parallel", [("MT-004", 2), ("MT-005", 1)], ["MT-001", "MT-002", "MT-003", "MT-004", "MT-005"]),
    ],
)
def test_a_recorded_run_resumes_where_it_stopped(name, left, tasks, tmp_path, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    ws = extract(name, tmp_path)
    recorded = progress(only_run(ws))
    log = tmp_path / "calls.jsonl"
    # The same chain, every level now an agent that gets it right; the call limit lifted.
    good = [level(lv["name"], "good.py", "--log", str(log)) for lv in recorded["policy"]["levels"][:2]]
    configure(
        ws,
        [*good, {"name": "gate", "hard_gate": True}],
        fail_threshold=recorded["policy"]["fail_threshold"],
        max_parallel=recorded["policy"]["max_parallel"],
        calls_per_hour=1000,
    )
    state = json.loads(ws.state_file.read_text())
    state["waiting"]["resume_at"] = "2000-01-01T00:00:00Z"  # the hour it waited for has passed
    ws.state_file.write_text(json.dumps(state))
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    assert engine.tick().action == "completed"
    assert result_field(ws, "Certificate") == "EXACT"
    assert [(c["mt"], c["iteration"]) for c in calls(log)] == left  # nothing that was done ran again
    base = recorded["base"]["head"]
    subjects = git(ws.root, "log", "--format=%s", "main", "--not", base).splitlines()[::-1]
    mp_id = recorded["mp_id"]
    assert [s for s in subjects if s.startswith(f"{mp_id} MT-")] == [
        f"{mp_id} {mt}: {t['title']}" for mt, t in zip(tasks, recorded["micro_tasks"], strict=True)
    ]
