"""Publishing the agent run (mp_engine/agent/run/publisher.py): the snapshot `status` shows,
what the run lacks before it starts, pauses, waits and a cancel."""

from __future__ import annotations

import threading
from dataclasses import replace

from mp_engine.agent.plan.decompose import decompose
from mp_engine.agent.progress import Progress
from mp_engine.agent.run.publisher import Publisher, missing, need_info
from mp_engine.agent.run.workbranch import WorkBranch
from mp_engine.config.load import load_config
from mp_engine.inbox.mpfile import parse
from tests.agentutil import GREET, ONE, agent_context, configure, level, run_scope
from tests.unit.agent.state.states import begin


def publisher_for(ctx, events: list, cancelled: threading.Event | None = None) -> tuple[Publisher, Progress]:
    progress = Progress.create(
        ctx.run.dir, mp_id=ctx.mp.mp_id, run_id=ctx.run.run_id, policy={}, tasks=[], base={"head": None, "digest": "d"}
    )
    ctx = replace(ctx, cancelled=cancelled or threading.Event())
    pub = Publisher(run_scope(ctx, events, per_hour=60), progress, WorkBranch(ctx.ws, ctx.mp.mp_id, ctx.run.run_id))
    return pub, progress


def test_the_snapshot_shows_the_task_iteration_level_and_budget(ws):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    pub, progress = publisher_for(ctx, [])
    state = begin(ctx.config.agent, decompose(ctx.mp), "d")
    pub.publish(state, live=True)
    pub.committed("MT-001", "abc123")
    current = Progress.load(ctx.run.dir).data["current_state"]
    assert (current["active_mt"], current["iteration"], current["level_name"]) == ("MT-001", 1, "fast")
    assert (
        current["budget_source"] == "`[agent] wall_budget`"
        and current["calls_per_hour"] == ctx.config.agent.calls_per_hour
    )
    assert progress.data["commits"] == {"MT-001": "abc123"}


def test_a_pause_and_a_wait_are_recorded_a_cancel_is_not_a_pause(ws):
    ctx = agent_context(ws, ONE, [level("fast", "good.py")])
    events: list = []
    cancelled = threading.Event()
    pub, progress = publisher_for(ctx, events, cancelled)
    state = begin(ctx.config.agent, decompose(ctx.mp), "d")
    assert pub.pause(state, "stop", "SIGTERM").status == "interrupted" and progress.status == "paused"
    waited = pub.wait(state, "usage_limit", "limit", "2026-11-26T10:00:00Z")
    assert waited.status == "waiting" and waited.extra["waiting"]["resume_at"] == "2026-11-26T10:00:00Z"
    ctx_work = WorkBranch(ctx.ws, ctx.mp.mp_id, ctx.run.run_id)
    ctx_work.ensure()
    cancelled.set()
    assert pub.pause(state, "stop", "a cancel stops the call").status == "cancelled"
    assert [n for n, _ in events][-1] == "micro_task_loop_cancelled"


def test_what_the_run_lacks_before_it_starts(ws):
    configure(ws, [])
    cfg = load_config(ws.root).agent
    mp = parse(ONE.encode())
    assert missing(cfg, mp, decompose(mp), planned=False)[0] == "no_levels"
    configure(ws, [level("fast", "good.py")])
    cfg = load_config(ws.root).agent
    assert missing(cfg, mp, decompose(mp), planned=True)[0] == "no_planner"
    bare = parse(b"# MP-3.9\nExecutor: agent\n\nDo it.\n")
    assert missing(cfg, bare, decompose(bare), planned=False)[0] == "no_checks"
    assert missing(cfg, mp, decompose(mp), planned=False) is None


def test_need_info_is_a_failed_result_with_its_certificate(ws):
    ctx = agent_context(ws, ONE, [level("fast", "good.py")])
    events: list = []
    res = need_info(
        "no_checks",
        "no checks",
        mp=ctx.mp,
        plan=decompose(ctx.mp),
        run_dir=ctx.run.dir,
        run_rel="r",
        emit=lambda name, **f: events.append(name),
    )
    assert res.status == "failed" and res.extra["certificate"]["type"] == "NEED_INFO"
    assert res.diagnosis.kind == "agent_need_info" and events == ["micro_task_loop_failed"]
