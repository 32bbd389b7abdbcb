"""The agent sections of RESULT_last.md."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.judge.certificate import Certificate
from mp_engine.agent.plan.decompose import MicroTask, Plan
from mp_engine.agent.run.report import sections
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import RecordKind
from mp_engine.config.agent import AgentConfig, AgentLevel
from tests.unit.agent.state.states import begin

PLAN = Plan("goal", (MicroTask("MT-001", 0, 3, "Add | a pipe"),), ())


def test_need_info_has_only_the_certificate():
    c = Certificate(cert.NEED_INFO, "no_checks", "No checks.", mt=None)
    out = sections(c, None, PLAN, "SYSTEM/runs/r", [])
    assert [s["title"] for s in out] == ["Halting certificate"]
    assert "- Certificate: **NEED_INFO** (no_checks)" in out[0]["body"]


def test_a_finished_loop_has_tasks_history_and_evidence_links():
    cfg = AgentConfig(levels=(AgentLevel(name="a", argv=("a", "{prompt_file}")),))
    state = begin(cfg, PLAN, "base")
    apply(
        state,
        RecordKind.ITERATION,
        {
            "mt": "MT-001",
            "iteration": 1,
            "level": 0,
            "gate": True,
            "residual": 0,
            "passed": ["check-001"],
            "failing": [],
            "digest": "d",
            "blocked": False,
            "blocked_reason": None,
            "error": None,
            "status_ok": True,
            "work_type": "code",
            "evidence": "agent/MT-001/iter-001",
        },
    )
    pauses = [{"at": "t0", "kind": "stop", "reason": "SIGTERM", "resume_at": None}]
    out = sections(state.final, state, PLAN, "SYSTEM/runs/r", pauses, ["SYSTEM/distill/r_MT-001.json"])
    titles = [s["title"] for s in out]
    assert titles == ["Halting certificate", "Micro-tasks", "Residual history", "Evidence"]
    assert "- Paused at t0: stop (SIGTERM)" in out[0]["body"]
    assert (
        "| MT-001 | Add \\| a pipe | completed | 1 | 0 | - | `SYSTEM/runs/r/agent/MT-001/iter-001/` |" in out[1]["body"]
    )
    assert "- Distillation candidate: `SYSTEM/distill/r_MT-001.json`" in out[3]["body"]
