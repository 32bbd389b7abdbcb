"""Plans, re-plans and drift checks as decisions on records (state/planning.py, state/campaign.py): the same
records, live or replayed, give the same state."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.decompose import Plan
from mp_engine.agent.state import ending
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import Pending, RecordKind, TaskStatus
from mp_engine.agent.state.model import RunState
from mp_engine.config.agent import AgentLevel
from tests.unit.agent.state.states import begin
from tests.unit.agent.state.test_iteration import cfg, names, plan, rec

GATE_LEVELS = (
    AgentLevel(name="small", argv=("a", "{prompt_file}")),
    AgentLevel(name="human", hard_gate=True),
)


def plan_rec(state: RunState, n: int, *, after: dict[int, list[int]] | None = None) -> dict:
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
    return {"round": state.campaign.plan_round, "attempt": state.campaign.plan_attempt + 1, "tasks": tasks}


def invalid(state: RunState, why: str = "not JSON") -> dict:
    return {"round": state.campaign.plan_round, "attempt": state.campaign.plan_attempt + 1, "invalid": why}


def drift(state: RunState, *regressed: str, verdict: str | None = None) -> dict:
    return {
        "at": state.campaign.drift_at,
        "checks": ["check-001"],
        "regressed": list(regressed),
        "reflector": {"verdict": verdict, "why": "because"} if verdict else None,
        "drift": bool(regressed) or verdict == "drifted",
    }


def fresh(**over) -> RunState:
    return begin(cfg(**over), Plan("goal", (), (0,)), "base", planned=True)


def test_a_planned_run_starts_by_planning_and_a_valid_plan_starts_its_first_task():
    s = fresh()
    assert s.campaign.pending == "plan" and s.task is None and s.final is None
    assert names(apply(s, RecordKind.PLAN, plan_rec(s, 2))) == ["campaign_plan_accepted"]
    assert s.campaign.pending is None and s.task.mt_id == "MT-001" and s.task.status == "active"
    assert [t.mt_id for t in s.plan.tasks] == ["MT-001", "MT-002"] and len(s.chains) == 2


def test_an_invalid_answer_is_asked_again_once_then_blocked():
    s = fresh()
    apply(s, RecordKind.PLAN, invalid(s, "a cycle"))
    assert s.campaign.pending == "plan" and s.campaign.plan_error == "a cycle" and s.final is None
    apply(s, RecordKind.PLAN, invalid(s, "unknown check"))
    assert s.final.type == cert.BLOCKED and s.final.reason == "invalid_plan" and "unknown check" in s.final.detail


def test_drift_checks_come_at_each_quarter_and_at_the_end_of_a_planned_run():
    s = fresh()
    apply(s, RecordKind.PLAN, plan_rec(s, 4))
    marks = []
    while s.final is None:
        if s.campaign.pending == "drift":
            marks.append(s.campaign.drift_at)
            apply(s, RecordKind.DRIFT, drift(s))
        else:
            apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert marks == [25, 50, 75, 100] and s.final.type == cert.EXACT and s.campaign.final_verified


def test_a_task_whose_chain_gives_up_is_re_planned_until_max_replans():
    s = fresh(levels=GATE_LEVELS, fail_threshold=1, max_replans=1)
    apply(s, RecordKind.PLAN, plan_rec(s, 2))
    effects = apply(s, RecordKind.ITERATION, rec(s))  # MT-001 fails at level 0, escalates onto the hard gate
    assert "campaign_replan_requested" in names(effects) and s.campaign.pending == "plan" and not s.failures
    assert s.tasks[0].status == "failed" and "re-planned" in s.tasks[0].note
    apply(s, RecordKind.PLAN, plan_rec(s, 1))
    assert [(t.mt_id, t.status, t.replaced) for t in s.tasks] == [
        ("MT-001", "failed", True),
        ("MT-002", "skipped", True),
        ("MT-003", "active", False),
    ]
    assert s.level == 0 and s.campaign.replans[0]["tasks"] == ["MT-003"]
    apply(s, RecordKind.ITERATION, rec(s))  # no re-plan left: as without a planner
    assert s.final.type == cert.BLOCKED and s.final.reason == "hard_gate" and s.final.mt == "MT-003"


def test_drift_re_plans_the_tasks_not_done_and_without_re_plans_ends_diverged():
    s = fresh(max_replans=1)
    apply(s, RecordKind.PLAN, plan_rec(s, 2))
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert s.campaign.pending == "drift" and s.campaign.drift_at == 50
    assert "campaign_replan_requested" in names(apply(s, RecordKind.DRIFT, drift(s, verdict="drifted")))
    assert s.campaign.replans[-1]["cause"] == "drift" and s.campaign.replans[-1]["mt"] == "MT-002"
    apply(s, RecordKind.PLAN, plan_rec(s, 1, after={0: [0]}))
    assert s.tasks[1].status == "skipped" and s.task.mt_id == "MT-003" and s.plan.needs(2) == {0}
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert s.campaign.pending == "drift" and s.campaign.drift_at == 100
    apply(s, RecordKind.DRIFT, drift(s, "check-001"))
    assert s.final.type == cert.DIVERGED and s.final.reason == "drift" and "check-001 regressed" in s.final.detail


def test_replaying_the_records_rebuilds_the_same_campaign():
    live = fresh(levels=GATE_LEVELS, fail_threshold=1)
    log: list[tuple[str, dict]] = []

    def feed(kind: str, r: dict) -> None:
        log.append((kind, r))
        apply(live, RecordKind(kind), r)

    feed("plan", invalid(live))
    feed("plan", plan_rec(live, 3, after={1: [0]}))
    feed("agent", rec(live, gate=True))
    feed("drift", drift(live))
    feed("agent", rec(live))  # MT-002 gives up: re-plan
    feed("plan", plan_rec(live, 1))
    while live.final is None:
        feed("drift", drift(live)) if live.campaign.pending == "drift" else feed("agent", rec(live, gate=True))
    again = fresh(levels=GATE_LEVELS, fail_threshold=1)
    for kind, r in log:
        apply(again, RecordKind(kind), r)
    assert [t.to_dict() for t in again.tasks] == [t.to_dict() for t in live.tasks]
    assert (
        again.final == live.final
        and again.campaign.drift_checks == live.campaign.drift_checks
        and again.campaign.replans == live.campaign.replans
    )
    assert live.final.type == cert.EXACT


def test_a_reflector_checks_a_listed_run_at_the_quarters_only():
    reflector = AgentLevel(name="critic", argv=("c", "{prompt_file}"))
    s = begin(cfg(reflector=reflector), plan(2), "base")
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert s.campaign.pending == "drift" and s.campaign.drift_at == 50
    apply(s, RecordKind.DRIFT, drift(s, verdict="aligned"))
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert s.campaign.pending is None and s.final.type == cert.EXACT  # no final check: the gate ran every check


def test_after_a_re_plan_cis_fix_task_can_start_in_worktrees_of_their_own():
    """CI's fix task needs the tasks that completed, not those a re-plan replaced (FAILED
    or SKIPPED, never COMPLETED): in worktrees of their own it can start."""

    s = begin(
        cfg(levels=GATE_LEVELS, fail_threshold=1, max_replans=1),
        Plan("goal", (), (0,)),
        "b",
        planned=True,
        isolated=True,
    )

    def start(i):
        apply(
            s,
            RecordKind.START,
            {
                "mt": s.tasks[i].mt_id,
                "mt_index": i,
                "base": "b",
                "digest": "d",
                "worktree": "w",
                "restart": False,
                "at": "2026-01-01T00:00:00Z",
                "seq": s.applied + 1,
            },
        )
        s.focus = i

    apply(s, RecordKind.PLAN, plan_rec(s, 1))
    start(0)
    apply(s, RecordKind.ITERATION, rec(s, mt_index=0))  # the hard gate: its chain gave up, a re-plan
    assert s.campaign.pending is Pending.PLAN
    apply(s, RecordKind.PLAN, plan_rec(s, 1))
    start(1)
    apply(s, RecordKind.ITERATION, rec(s, gate=True, mt_index=1))
    apply(
        s,
        RecordKind.INTEGRATE,
        {"mt_index": 1, "outcome": "integrated", "attempt": 1, "commit": "c", "at": "2026-01-01T00:00:01Z"},
    )
    while s.final is None:
        if s.campaign.pending is Pending.DRIFT:
            apply(s, RecordKind.DRIFT, drift(s))
        else:
            ending.settle(s)
    assert s.final.type == cert.EXACT and s.tasks[0].status is TaskStatus.FAILED
    apply(
        s,
        RecordKind.CI,
        {
            "round": 1,
            "sha": "abc",
            "state": "failure",
            "step": "fix",
            "failing": ["lint"],
            "text": "E501",
            "url": "u",
            "seq": s.applied + 1,
        },
    )
    assert s.final is None and s.tasks[2].status is TaskStatus.PENDING
    assert s.startable(set(s.live())) == [2], "the CI fix task can never start: it needs the replaced MT-001"
