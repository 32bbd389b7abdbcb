"""What ends a run before anything more starts (mp_engine/agent/run/guard.py): SYSTEM/STOP,
the budget, the iteration cap, each saying what the run was about to do; a `(pause)` task
that one-at-a-time work reaches."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.decompose import decompose
from mp_engine.agent.run import guard
from mp_engine.agent.state.kinds import Pending
from tests.agentutil import GREET, agent_context, level, run_scope
from tests.unit.agent.state.states import begin


def test_stop_says_the_task_it_stopped_before_one_at_a_time_and_nothing_more_at_once(ws):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    run = run_scope(ctx)
    one = begin(ctx.config.agent, decompose(ctx.mp), "base")
    assert guard.due(run, one) is None
    ws.stop_file.write_text("")
    stop = guard.due(run, one)
    assert (stop.type, stop.reason) == (cert.BACKPRESSURE, "stop_file")
    assert stop.detail == "SYSTEM/STOP was found before MT-001 iteration 1; the loop stopped as asked."
    at_once = begin(ctx.config.agent, decompose(ctx.mp), "base", isolated=True)
    assert guard.due(run, at_once).detail == "SYSTEM/STOP was found; the loop stopped as asked."
    one.campaign.pending = Pending.DRIFT
    assert guard.due(run, one).detail == "SYSTEM/STOP was found before the plan; the loop stopped as asked."
    guard.end(one, guard.due(run, one))
    assert one.final.type == cert.BACKPRESSURE


def test_the_budget_and_the_iteration_cap_say_what_did_not_pass(ws):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    run = run_scope(ctx)
    s = begin(ctx.config.agent, decompose(ctx.mp), "base")
    s.total = ctx.config.agent.max_iterations
    stop = guard.due(run, s)
    assert stop.reason == "max_iterations" and "were spent before MT-001 passed" in stop.detail
    ctx.budget.used = ctx.budget.total
    stop = guard.due(run, s)
    assert stop.type == cert.TIMEOUT and stop.reason == "wall_budget" and "spent before MT-001 passed" in stop.detail


def test_a_pause_point_one_at_a_time_ends_the_run_before_the_task(ws):
    text = GREET.replace('2. Write "bye"', '2. (pause) Write "bye"')
    ctx = agent_context(ws, text, [level("fast", "good.py")])
    run = run_scope(ctx)
    s = begin(ctx.config.agent, decompose(ctx.mp), "base")
    assert guard.due(run, s) is None
    s.focus = 1
    stop = guard.due(run, s)
    assert stop.pause_before == 1
    guard.end(s, stop)
    assert s.final.reason == "pause_point" and s.final.mt == "MT-002"
