"""The engine's own verdict (mp_engine/agent/checks.py): checks run in the task's
workspace, as ledger steps under the iteration's prefix; a cancel cuts them short."""

from __future__ import annotations

from dataclasses import replace

from mp_engine.agent.judge.checks import Checker
from mp_engine.core.workspace import Workspace
from tests.agentutil import GREET, agent_context, level


def test_checks_run_in_the_given_workspace_under_the_step_s_prefix(ws, tmp_path):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "out" / "a.txt").write_text("hello\n")  # in the worktree, not in the workspace
    checker = Checker(replace(ctx, ws=Workspace(work)), ctx.mp)
    ran = checker.run([0, 1], "MT-002_iter-001")
    assert [(c.step_id, ok) for c, ok, _ in ran] == [
        ("MT-002_iter-001_check-001", True),
        ("MT-002_iter-001_check-002", False),
    ]
    assert ran[1][2] == 2  # grep's exit code: out/b.txt does not exist there
    assert ctx.ledger.step("MT-002_iter-001_check-001") is not None


def test_a_cancel_interrupts_the_checks(ws):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    ctx.cancelled.set()
    assert Checker(ctx, ctx.mp).run([0], "MT-001_iter-001") is None
