"""Recording a step of the agent run (mp_engine/agent/run/recorder.py): the dual gate, the
record and its evidence, the learnings entry, a fatal call's record, a side step's."""

from __future__ import annotations

import json

from mp_engine.agent.call.invoke import Call
from mp_engine.agent.evidence import IterationEvidence, Worktree
from mp_engine.agent.judge.checks import iter_check
from mp_engine.agent.judge.claims import Claims
from mp_engine.agent.run.attempt import Attempt
from mp_engine.agent.run.recorder import Recorder, error_signature
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.scope import WorkspaceScope
from mp_engine.record.ledger import StepStatus
from tests.agentutil import GREET, agent_context, level, run_scope


def recorder_for(ctx, events: list) -> tuple[Recorder, AgentSteps]:
    run = run_scope(ctx, events)
    rec = Recorder(run, WorkspaceScope.at(ctx.ws.root, ctx.ws.local_dir / "map.json", Worktree(ctx.ws.root).snapshot()))
    return rec, run.steps


def test_the_gate_needs_the_claim_and_every_check_and_the_evidence_is_kept(ws):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    events: list = []
    recorder, steps = recorder_for(ctx, events)
    step = steps.start("MT-002_iter-001", "agent", "k")
    ev = IterationEvidence(ctx.run.dir, "MT-002", 1)
    ev.write("prompt.md", "p")
    checks = [
        (iter_check(ctx.mp.checks[0], step.step_id), True, 0),
        (iter_check(ctx.mp.checks[1], step.step_id), False, 1),
    ]
    used = ctx.budget.used
    a = Attempt("MT-002", 1, 1, ctx.config.agent.levels[0], 0, step, ev, [0, 1])
    rec = recorder.evidence(a, Call("ok", exit_code=0, duration=2.5), Claims(claimed_complete=True), checks)
    assert json.loads(ev.path("verdict.json").read_text())["gate"] is False  # the evidence, before its place
    assert ctx.ledger.step("MT-002_iter-001").status is StepStatus.IN_PROGRESS and "seq" not in rec
    rec = recorder.iteration(rec, step, seq=4)
    assert (rec["gate"], rec["residual"], rec["failing"]) == (False, 1, ["check-002"])
    assert rec["error"] == "check-002:exit 1" and rec["seq"] == 4
    assert ctx.budget.used == used  # the run's wall time is the scheduler's to charge, not each record's
    assert ctx.ledger.step("MT-002_iter-001").status is StepStatus.COMPLETED
    assert "MT-002 iteration 1" in (ctx.run.dir / "agent" / "learnings.md").read_text()
    assert [n for n, _ in events] == ["micro_task_validation", "micro_task_iteration_complete"]


def test_a_fatal_call_s_record_carries_its_fix(ws):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    recorder, steps = recorder_for(ctx, [])
    step = steps.start("MT-001_iter-001", "agent", "k")
    ev = IterationEvidence(ctx.run.dir, "MT-001", 1)
    a = Attempt("MT-001", 0, 1, ctx.config.agent.levels[0], 0, step, ev, [0])
    rec = recorder.fatal(
        a, Call("auth", detail="401"), ("agent_auth", "not logged in", "log in"), mt_id="MT-001", iteration=1, seq=1
    )
    assert rec["fatal"] == {"reason": "agent_auth", "detail": "not logged in", "fix": "log in"}
    assert ctx.ledger.step("MT-001_iter-001").status is StepStatus.FAILED


def test_a_side_step_keeps_its_record_as_evidence(ws):
    ctx = agent_context(ws, GREET, [level("fast", "good.py")])
    recorder, steps = recorder_for(ctx, [])
    step = steps.start("PLAN-1_iter-001", "plan", "k")
    ev = IterationEvidence(ctx.run.dir, "PLAN-1", 1)
    recorder.side(step, ev, {"round": 0, "invalid": "no plan block"}, ok=False)
    assert json.loads(ev.path("record.json").read_text())["invalid"] == "no plan block"
    assert ctx.ledger.step("PLAN-1_iter-001").error == "no plan block"


def test_the_error_signature_names_the_call_or_the_failing_checks():
    assert error_signature(Call("timeout"), []) == "call:timeout"
    assert error_signature(Call("ok"), []) is None
