"""One attempt at one micro-task (mp_engine/agent/run/attempt.py), in its own workspace: the
call, the claims, the checks and the record, or the call's outcome when it did not answer."""

from __future__ import annotations

import hashlib

from mp_engine.agent.call.limiter import CallLimiter
from mp_engine.agent.evidence import IterationEvidence, Worktree
from mp_engine.agent.plan.decompose import decompose
from mp_engine.agent.run.attempt import Attempt, record, work
from mp_engine.agent.run.parts import workspace_parts
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.scope import RunScope, WorkspaceScope
from tests.agentutil import ONE, agent_context, level
from tests.unit.agent.state.states import begin

NONCE = "n0nce"


def setup(ctx):
    steps = AgentSteps(ctx.ledger, ctx.run.steps_dir)
    limiter = CallLimiter(ctx.ws.local_dir / "calls.log", 100)
    run = RunScope(ctx, ctx.config.agent, NONCE, steps, limiter, ctx.run.dir / "agent" / "learnings.md")
    place = WorkspaceScope.at(ctx.ws.root, ctx.ws.local_dir / "map.json", Worktree(ctx.ws.root).snapshot())
    return workspace_parts(run, place), steps


def one(ctx, parts, steps) -> Attempt:
    ev = IterationEvidence(ctx.run.dir, "MT-001", 1)
    state = begin(ctx.config.agent, decompose(ctx.mp), "base")
    text = steps.prompt_once(
        ev, "MT-001_iter-001", lambda: parts.prompter.worker(state, 0, 1, ctx.config.agent.levels[0])
    )
    step = steps.start("MT-001_iter-001", "agent", "MT-001", "1", "0", hashlib.sha256(text.encode()).hexdigest())
    return Attempt("MT-001", 0, 1, ctx.config.agent.levels[0], 0, step, ev, [0])


def test_an_honest_agent_s_attempt_passes_the_gate_in_its_workspace(ws):
    ctx = agent_context(ws, ONE, [level("fast", "good.py")])
    parts, steps = setup(ctx)
    a = one(ctx, parts, steps)
    out = work(parts, a)
    assert out.call.kind == "ok" and out.answered and not out.checks_interrupted
    rec = record(parts, a, out, seq=7)
    assert rec["gate"] and rec["passed"] == ["check-001"] and rec["seq"] == 7
    assert (ws.root / "out" / "a.txt").read_text().strip() == "hello"


def test_a_liar_s_claim_is_checked_and_fails(ws):
    ctx = agent_context(ws, ONE, [level("fast", "liar.py")])
    parts, steps = setup(ctx)
    a = one(ctx, parts, steps)
    rec = record(parts, a, work(parts, a), seq=1)
    assert rec["claimed"] and not rec["gate"] and rec["failing"] == ["check-001"]


def test_a_call_that_cannot_work_leaves_no_record(ws):
    ctx = agent_context(ws, ONE, [{"name": "ghost", "argv": ["no-such-agent-cli", "{prompt_file}"]}])
    parts, steps = setup(ctx)
    out = work(parts, one(ctx, parts, steps))
    assert out.call.kind == "not_found" and not out.answered
