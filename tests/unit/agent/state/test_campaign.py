"""Plans, re-plans and drift checks as decisions on records (campaignstate.py): the same
records, live or replayed, give the same state."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.decompose import Plan
from mp_engine.agent.state.loopstate import LoopState
from mp_engine.config import AgentLevel
from tests.unit.agent.state.test_loopstate import cfg, names, plan, rec

GATE_LEVELS = (
    AgentLevel(name="small", argv=("a", "{prompt_file}")),
    AgentLevel(name="human", hard_gate=True),
)


def plan_rec(state: LoopState, n: int, *, after: dict[int, list[int]] | None = None) -> dict:
    """A valid planning record with `n` tasks numbered after the existing ones."""
    first = len(state.tasks)
    tasks = [
        {
            "mt_id": f"MT-{first + k + 1:03d}",
            "ref": f"t{first + k}",
            "title": f"task {first + k}",
            "description": "",
            "after": (after or {}).get(k, []),
            "files": [],
            "domain": None,
            "checks": [0],
        }
        for k in range(n)
    ]
    return {"round": state.plan_round, "attempt": state.plan_attempt + 1, "tasks": tasks}


def invalid(state: LoopState, why: str = "not JSON") -> dict:
    return {"round": state.plan_round, "attempt": state.plan_attempt + 1, "invalid": why}


def drift(state: LoopState, *regressed: str, verdict: str | None = None) -> dict:
    return {
        "at": state.drift_at,
        "checks": ["check-001"],
        "regressed": list(regressed),
        "reflector": {"verdict": verdict, "why": "because"} if verdict else None,
        "drift": bool(regressed) or verdict == "drifted",
    }


def fresh(**over) -> LoopState:
    return LoopState(cfg(**over), Plan("goal", (), (0,)), "base", planned=True)


def test_a_planned_run_starts_by_planning_and_a_valid_plan_starts_its_first_task():
    s = fresh()
    assert s.pending == "plan" and s.task is None and s.final is None
    assert names(s.apply_plan(plan_rec(s, 2))) == ["campaign_plan_accepted"]
    assert s.pending is None and s.task.mt_id == "MT-001" and s.task.status == "active"
    assert [t.mt_id for t in s.plan.tasks] == ["MT-001", "MT-002"] and len(s.chains) == 2


def test_an_invalid_answer_is_asked_again_once_then_blocked():
    s = fresh()
    s.apply_plan(invalid(s, "a cycle"))
    assert s.pending == "plan" and s.plan_error == "a cycle" and s.final is None
    s.apply_plan(invalid(s, "unknown check"))
    assert s.final.type == cert.BLOCKED and s.final.reason == "invalid_plan" and "unknown check" in s.final.detail


def test_drift_checks_come_at_each_quarter_and_at_the_end_of_a_planned_run():
    s = fresh()
    s.apply_plan(plan_rec(s, 4))
    marks = []
    while s.final is None:
        if s.pending == "drift":
            marks.append(s.drift_at)
            s.apply_drift(drift(s))
        else:
            s.apply(rec(s, gate=True))
    assert marks == [25, 50, 75, 100] and s.final.type == cert.EXACT and s.final_verified


def test_a_task_whose_chain_gives_up_is_re_planned_until_max_replans():
    s = fresh(levels=GATE_LEVELS, fail_threshold=1, max_replans=1)
    s.apply_plan(plan_rec(s, 2))
    effects = s.apply(rec(s))  # MT-001 fails at level 0, escalates onto the hard gate
    assert "campaign_replan_requested" in names(effects) and s.pending == "plan" and not s.failures
    assert s.tasks[0].status == "failed" and "re-planned" in s.tasks[0].note
    s.apply_plan(plan_rec(s, 1))
    assert [(t.mt_id, t.status, t.replaced) for t in s.tasks] == [
        ("MT-001", "failed", True),
        ("MT-002", "skipped", True),
        ("MT-003", "active", False),
    ]
    assert s.level == 0 and s.replans[0]["tasks"] == ["MT-003"]
    s.apply(rec(s))  # no re-plan left: as without a planner
    assert s.final.type == cert.BLOCKED and s.final.reason == "hard_gate" and s.final.mt == "MT-003"


def test_drift_re_plans_the_tasks_not_done_and_without_re_plans_ends_diverged():
    s = fresh(max_replans=1)
    s.apply_plan(plan_rec(s, 2))
    s.apply(rec(s, gate=True))
    assert s.pending == "drift" and s.drift_at == 50
    assert "campaign_replan_requested" in names(s.apply_drift(drift(s, verdict="drifted")))
    assert s.replans[-1]["cause"] == "drift" and s.replans[-1]["mt"] == "MT-002"
    s.apply_plan(plan_rec(s, 1, after={0: [0]}))
    assert s.tasks[1].status == "skipped" and s.task.mt_id == "MT-003" and s.plan.needs(2) == {0}
    s.apply(rec(s, gate=True))
    assert s.pending == "drift" and s.drift_at == 100
    s.apply_drift(drift(s, "check-001"))
    assert s.final.type == cert.DIVERGED and s.final.reason == "drift" and "check-001 regressed" in s.final.detail


def test_replaying_the_records_rebuilds_the_same_campaign():
    live = fresh(levels=GATE_LEVELS, fail_threshold=1)
    log: list[tuple[str, dict]] = []

    def feed(kind: str, r: dict) -> None:
        log.append((kind, r))
        {"plan": live.apply_plan, "drift": live.apply_drift, "agent": live.apply}[kind](r)

    feed("plan", invalid(live))
    feed("plan", plan_rec(live, 3, after={1: [0]}))
    feed("agent", rec(live, gate=True))
    feed("drift", drift(live))
    feed("agent", rec(live))  # MT-002 gives up: re-plan
    feed("plan", plan_rec(live, 1))
    while live.final is None:
        feed("drift", drift(live)) if live.pending == "drift" else feed("agent", rec(live, gate=True))
    again = fresh(levels=GATE_LEVELS, fail_threshold=1)
    for kind, r in log:
        {"plan": again.apply_plan, "drift": again.apply_drift, "agent": again.apply}[kind](r)
    assert [t.to_dict() for t in again.tasks] == [t.to_dict() for t in live.tasks]
    assert again.final == live.final and again.drift_checks == live.drift_checks and again.replans == live.replans
    assert live.final.type == cert.EXACT


def test_a_reflector_checks_a_listed_run_at_the_quarters_only():
    reflector = AgentLevel(name="critic", argv=("c", "{prompt_file}"))
    s = LoopState(cfg(reflector=reflector), plan(2), "base")
    s.apply(rec(s, gate=True))
    assert s.pending == "drift" and s.drift_at == 50
    s.apply_drift(drift(s, verdict="aligned"))
    s.apply(rec(s, gate=True))
    assert s.pending is None and s.final.type == cert.EXACT  # no final check: the gate ran every check
