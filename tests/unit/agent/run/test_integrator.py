"""Integration one task at a time (mp_engine/agent/integrator.py), with real git and real
checks: a clean pick whose checks pass moves mp/<MP-id>; a conflict or a broken check
leaves it where it was; a crash mid-integration is undone."""

from __future__ import annotations

from dataclasses import replace

from mp_engine.agent.judge.checks import Checker
from mp_engine.agent.run.integrator import Integrator
from mp_engine.agent.run.workbranch import WorkBranch
from mp_engine.agent.run.worktrees import TaskWorktrees
from mp_engine.core.workspace import Workspace
from tests.agentutil import agent_context, level
from tests.gitutil import git

MP = """# MP-9.3 Two notes
Executor: agent

1. Append "a" to `notes.txt`. (after none)
2. Append "b" to `notes.txt`. (after none)

## Validate

```bash
# MT-001
grep -qx a notes.txt
```

```bash
# MT-002
! grep -qx broken notes.txt
```
"""


def setup(ws):
    (ws.root / "notes.txt").write_text("start\n")
    ctx = agent_context(ws, MP, [level("fast", "good.py")])
    work = WorkBranch(ws, ctx.mp.mp_id, ctx.run.run_id, parallel=True)
    work.ensure()
    checker = Checker(replace(ctx, ws=Workspace(work.path)), ctx.mp)
    return Integrator(work, checker), TaskWorktrees(work)


def task_commit(trees: TaskWorktrees, mt: str, line: str) -> str:
    trees.start(mt)
    with (trees.path(mt) / "notes.txt").open("a") as f:
        f.write(line + "\n")
    return trees.commit(mt, f"MP-9.3 {mt}: {line}", "Evidence: e")


def test_a_clean_pick_whose_checks_pass_moves_the_work_branch(ws):
    integrator, trees = setup(ws)
    base = integrator.tip()
    done = integrator.integrate(task_commit(trees, "MT-001", "a"), [0], "INT-1")
    assert done.outcome == "integrated" and done.base == base and done.failing == []
    assert git(ws.root, "rev-parse", "mp/MP-9.3") == done.commit != base
    assert git(ws.root, "log", "-1", "--format=%s", "mp/MP-9.3") == "MP-9.3 MT-001: a"


def test_a_conflict_leaves_the_work_branch_where_it_was_and_says_where(ws):
    integrator, trees = setup(ws)
    first, second = task_commit(trees, "MT-001", "a"), task_commit(trees, "MT-002", "b")
    assert integrator.integrate(first, [0], "INT-1").outcome == "integrated"
    tip = integrator.tip()
    clash = integrator.integrate(second, [0, 1], "INT-2")
    assert clash.outcome == "conflict" and clash.conflict == ["notes.txt"] and "<<<<<<<" in clash.diff
    assert integrator.tip() == tip and git(integrator.work.path, "status", "--porcelain") == ""


def test_a_check_that_breaks_on_the_combined_work_undoes_the_pick(ws):
    integrator, trees = setup(ws)
    broken = task_commit(trees, "MT-002", "broken")
    tip = integrator.tip()
    result = integrator.integrate(broken, [1], "INT-1")
    assert result.outcome == "broke" and result.failing == ["check-002"]
    assert integrator.tip() == tip


def test_after_a_crash_a_pick_not_recorded_as_integrated_is_undone(ws):
    integrator, trees = setup(ws)
    commit = task_commit(trees, "MT-001", "a")
    base = integrator.tip()
    git(integrator.work.path, "cherry-pick", commit)  # the crash came after the pick
    assert integrator.recover({"MP-9.3 MT-001: a": "MT-001"}) == "MT-001"
    assert integrator.tip() == base
    assert integrator.recover({"MP-9.3 MT-001: a": "MT-001"}) is None  # nothing left to undo
