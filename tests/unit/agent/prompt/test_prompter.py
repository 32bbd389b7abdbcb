"""What a prompt is made of (mp_engine/agent/prompter.py): a worker's carries the last
failure's check output, a planner's the re-plan's cause, a reflector's the diff."""

from __future__ import annotations

from mp_engine.agent.evidence import Worktree
from mp_engine.agent.plan.decompose import decompose, goal_of
from mp_engine.agent.prompt.prompter import Prompter
from mp_engine.agent.scope import WorkspaceScope
from mp_engine.agent.state import campaign
from tests.agentutil import GREET, PLANNED, agent_context, level, run_scope
from tests.unit.agent.state.states import begin


def prompter_for(ctx) -> Prompter:
    Worktree(ctx.ws.root)
    place = WorkspaceScope.at(ctx.ws.root, ctx.ws.local_dir / "map.json", Worktree(ctx.ws.root).snapshot())
    return Prompter(run_scope(ctx), place)


def test_a_worker_s_next_prompt_shows_the_failing_check_s_output(ws):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    p = prompter_for(ctx)
    state = begin(ctx.config.agent, decompose(ctx.mp), "d")
    first = p.worker(state, 0, 1, ctx.config.agent.levels[0])
    assert "MT-001" in first and "NONCE: n0nce" in first and str(ws.root) in first
    (ctx.run.steps_dir / "MT-001_iter-001_check-001.stderr").write_text("grep: out/a.txt: No such file\n")
    record = {"checks": [{"id": "check-001", "step": "MT-001_iter-001_check-001", "ok": False}]}
    assert p.failing_tails(record) == {"check-001": "grep: out/a.txt: No such file\n"}


def test_a_re_plan_prompt_says_why_and_a_reflection_shows_the_diff(ws):
    ctx = agent_context(ws, PLANNED, [level("fast", "good.py")], planner=level("planner", "planner.py"))
    p = prompter_for(ctx)
    state = begin(ctx.config.agent, goal_of(ctx.mp), "d", planned=True)
    assert "check-001" in p.planner(state) and "n0nce" in p.planner(state)
    campaign.request_replan(state, "drift", None, "drift", "the work drifted")
    assert "The plan: the work drifted" in p.planner(state)
    (ws.root / "new.txt").write_text("x\n")
    reflection = p.reflection(state, 50, ["check-002"])
    assert "50 % of the tasks done" in reflection and "new.txt" in reflection and "check-002" in reflection
