"""The agent run's ledger steps (mp_engine/agent/run/steps.py): keyed, kept prompts,
released back to pending, finished durably with their record as the artifact."""

from __future__ import annotations

from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.run.steps import AgentSteps, iteration_step
from mp_engine.record.ledger import Ledger, StepStatus, idempotency_key, read_artifact
from tests.agentutil import ONE, agent_context, level


def test_a_step_is_keyed_by_what_identifies_it_and_finishes_with_its_record(ws):
    ctx = agent_context(ws, ONE, [level("fast", "good.py")])
    steps = AgentSteps(ctx.ledger, ctx.run.steps_dir)
    step = steps.start(iteration_step("MT-001", 2), "agent", "MT-001", "2", "0", "abc")
    assert step.step_id == "MT-001_iter-002" and step.status is StepStatus.IN_PROGRESS
    assert step.idempotency_key == idempotency_key("MT-001", "2", "0", "abc")
    steps.finish(step, {"ok": True, "residual": 0}, ok=True)
    on_disk = Ledger.load(ctx.run.ledger_path).step("MT-001_iter-002")
    assert on_disk.status is StepStatus.COMPLETED
    assert read_artifact(ctx.run.steps_dir, on_disk)["residual"] == 0


def test_a_prompt_is_built_once_and_kept_for_the_retry(ws):
    ctx = agent_context(ws, ONE, [level("fast", "good.py")])
    steps = AgentSteps(ctx.ledger, ctx.run.steps_dir)
    ev = IterationEvidence(ctx.run.dir, "MT-001", 1)
    built = []
    first = steps.prompt_once(ev, "MT-001_iter-001", lambda: built.append(1) or "prompt one")
    step = steps.start("MT-001_iter-001", "agent", "k")
    steps.release(step)  # a stop: back to pending, the same prompt next time
    again = steps.prompt_once(ev, "MT-001_iter-001", lambda: built.append(2) or "prompt two")
    assert first == again == "prompt one" and built == [1]
    assert ctx.ledger.step("MT-001_iter-001").status is StepStatus.PENDING
    assert ctx.ledger.step("MT-001_iter-001").pgid is None


def test_a_spawned_process_group_is_recorded_for_recovery(ws):
    import os

    ctx = agent_context(ws, ONE, [level("fast", "good.py")])
    steps = AgentSteps(ctx.ledger, ctx.run.steps_dir)
    step = steps.start("MT-001_iter-001", "agent", "k")
    steps.on_spawn(step)(os.getpid())
    assert step.pgid == os.getpid() and step.proc_start and step.proc_start > 0
