"""The loop's decisions as a pure function of iteration records: gate, escalation,
drop-back, divergence, breakers, blocked, hard gate, iteration cap, and replay."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.decompose import MicroTask, Plan
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import RecordKind
from mp_engine.agent.state.model import RunState
from mp_engine.config.agent import AgentConfig, AgentLevel
from tests.unit.agent.state.states import begin

LEVELS = (AgentLevel(name="small", argv=("a", "{prompt_file}")), AgentLevel(name="big", argv=("b", "{prompt_file}")))


def plan(n: int, checks: tuple[int, ...] = (0,)) -> Plan:
    """n micro-tasks; `checks`: per check, the first micro-task it accepts."""
    return Plan("goal", tuple(MicroTask(f"MT-{i + 1:03d}", i, i + 1, f"task {i + 1}") for i in range(n)), checks)


def cfg(**over) -> AgentConfig:
    return AgentConfig(levels=over.pop("levels", LEVELS), **over)


def rec(state: RunState, *, gate: bool = False, residual: int = 1, digest: str | None = None, **over) -> dict:
    task = state.task
    assert task is not None
    r = {
        "mt": task.mt_id,
        "iteration": state.next_iteration,
        "level": state.level,
        "gate": gate,
        "residual": 0 if gate else residual,
        "passed": ["check-001"] if gate else [],
        "failing": [] if gate else ["check-001"],
        "digest": digest or f"d{state.total}",  # a new fingerprint: progress
        "blocked": False,
        "blocked_reason": None,
        "error": None if gate else "check-001:exit 1",
        "status_ok": True,
        "work_type": "code",
        "evidence": f"agent/{task.mt_id}/iter-{state.next_iteration:03d}",
    }
    r.update(over)
    return r


def names(effects) -> list[str]:
    return [e.name for e in effects if e.kind == "event"]


def test_every_task_passing_the_gate_is_exact():
    s = begin(cfg(), plan(2), "base")
    assert names(apply(s, RecordKind.ITERATION, rec(s, gate=True))) == ["micro_task_complete"]
    assert s.final is None and s.task.mt_id == "MT-002" and s.task.status == "active"
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert s.final.type == cert.EXACT and s.final.residual == 0 and s.total == 2


def test_claims_without_any_check_are_unverified_never_exact():
    """`[agent] require_checks = false` and an MP without checks (issue #16)."""
    s = begin(cfg(), plan(1, checks=()), "base")
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert s.final.type == cert.UNVERIFIED and s.final.reason == "claims_only"


def test_three_failures_escalate_and_success_above_level_0_distills_and_drops_back():
    s = begin(cfg(), plan(2), "base")
    for _ in range(2):
        assert apply(s, RecordKind.ITERATION, rec(s)) == []
    assert (
        names(apply(s, RecordKind.ITERATION, rec(s))) == ["micro_task_escalated"]
        and s.level == 1
        and s.escalations == 1
    )
    effects = apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert [e.kind for e in effects] == ["event", "commit", "distill", "event"]
    assert names(effects) == ["micro_task_complete", "micro_task_drop_back"]
    assert s.level == 0 and s.drop_backs == 1 and s.tasks[0].final_level == 1


def test_a_growing_residual_escalates_and_at_the_last_level_diverges():
    """Phuc's rule (three residuals in a row, each higher): where the chain can escalate
    it escalates, recorded with its cause; on the last level the MP ends DIVERGED. The
    trend starts afresh on the new level (a new model deserves a fresh start)."""
    s = begin(cfg(fail_threshold=10), plan(1), "base")
    apply(s, RecordKind.ITERATION, rec(s, residual=1))
    apply(s, RecordKind.ITERATION, rec(s, residual=2))
    effects = apply(s, RecordKind.ITERATION, rec(s, residual=3))
    assert names(effects) == ["micro_task_escalated"] and effects[0].fields["cause"] == "residual_grew"
    assert s.level == 1 and s.final is None and s.last_trip["escalated"] is True
    for residual in (2, 3):
        apply(s, RecordKind.ITERATION, rec(s, residual=residual))
    assert s.final is None  # two rises on the new level are not three residuals yet
    apply(s, RecordKind.ITERATION, rec(s, residual=4))
    assert s.final.type == cert.DIVERGED and s.final.reason == "residual_grew" and "2 -> 3 -> 4" in s.final.detail


def test_an_open_breaker_escalates_where_it_can_even_before_fail_threshold():
    s = begin(cfg(fail_threshold=3), plan(1), "base")
    apply(s, RecordKind.ITERATION, rec(s, status_ok=False))
    effects = apply(s, RecordKind.ITERATION, rec(s, status_ok=False))  # max_missing_status = 2 < fail_threshold = 3
    assert names(effects) == ["micro_task_escalated"] and effects[0].fields["cause"] == "breaker:missing_status"
    assert s.level == 1 and s.final is None
    apply(s, RecordKind.ITERATION, rec(s, digest="changed"))  # the workspace moved: progress
    for _ in range(2):
        apply(s, RecordKind.ITERATION, rec(s, digest="changed"))
    assert s.final is None
    apply(
        s, RecordKind.ITERATION, rec(s, digest="changed")
    )  # the third iteration in a row that changed nothing, on the last level
    assert s.final.type == cert.DIVERGED and s.final.reason == "breaker:no_progress"


def test_a_breaker_onto_a_hard_gate_says_why_it_stopped():
    levels = (
        AgentLevel(name="small", argv=("a", "{prompt_file}")),
        AgentLevel(name="human", argv=("h", "{prompt_file}"), hard_gate=True),
    )
    s = begin(cfg(levels=levels, fail_threshold=3), plan(1), "base")
    apply(s, RecordKind.ITERATION, rec(s, status_ok=False))
    effects = apply(s, RecordKind.ITERATION, rec(s, status_ok=False))
    assert names(effects) == ["micro_task_escalated", "micro_task_hard_gate"]
    assert s.final.type == cert.BLOCKED and "circuit breaker missing_status" in s.final.detail


def test_done_signals_asks_for_that_many_done_claims_in_a_row():
    s = begin(cfg(done_signals=2), plan(1), "base")
    effects = apply(s, RecordKind.ITERATION, rec(s, gate=True, claimed=True))
    assert names(effects) == ["micro_task_done_signal"] and s.final is None and s.cur.fails_at_level == 0
    apply(s, RecordKind.ITERATION, rec(s, gate=True, claimed=True))
    assert s.final.type == cert.EXACT


def test_the_agents_blocked_claim_ends_blocked_with_its_reason():
    s = begin(cfg(), plan(1), "base")
    effects = apply(s, RecordKind.ITERATION, rec(s, blocked=True, blocked_reason="needs the API key"))
    assert names(effects) == ["micro_task_blocked"]
    assert s.final.type == cert.BLOCKED and "needs the API key" in s.final.detail and s.tasks[0].status == "blocked"


def test_escalating_onto_a_hard_gate_stops_there():
    levels = (
        AgentLevel(name="small", argv=("a", "{prompt_file}")),
        AgentLevel(name="human", argv=("h", "{prompt_file}"), hard_gate=True),
    )
    s = begin(cfg(levels=levels, fail_threshold=1), plan(1), "base")
    effects = apply(s, RecordKind.ITERATION, rec(s))
    assert names(effects) == ["micro_task_escalated", "micro_task_hard_gate"]
    assert s.final.type == cert.BLOCKED and s.final.reason == "hard_gate"


def test_the_iteration_cap_ends_in_timeout_with_the_best_iteration():
    s = begin(cfg(max_iterations=3, fail_threshold=10), plan(1), "base")
    for residual in (3, 1, 2):
        apply(s, RecordKind.ITERATION, rec(s, residual=residual))
    assert s.final.type == cert.TIMEOUT and s.final.reason == "max_iterations"
    assert s.final.best["iteration"] == 2 and s.final.best["residual"] == 1


def test_replaying_the_records_rebuilds_the_same_state():
    live = begin(cfg(), plan(2), "base")
    records = []
    for gate in (False, False, False, True, False, True):
        r = rec(live, gate=gate)
        records.append(r)
        apply(live, RecordKind.ITERATION, r)
    replayed = begin(cfg(), plan(2), "base")
    for r in records:
        apply(replayed, RecordKind.ITERATION, r)
    assert [t.to_dict() for t in replayed.tasks] == [t.to_dict() for t in live.tasks]
    assert (replayed.level, replayed.total, replayed.escalations, replayed.drop_backs) == (
        live.level,
        live.total,
        live.escalations,
        live.drop_backs,
    )
    assert replayed.final.to_dict() == live.final.to_dict()


def planned(after: list[tuple[int, ...] | None], checks: tuple[int, ...]) -> Plan:
    tasks = tuple(MicroTask(f"MT-{i + 1:03d}", i, i + 1, f"task {i + 1}", None, a) for i, a in enumerate(after))
    return Plan("goal", tasks, checks)


def blocked(state: RunState) -> dict:
    return rec(state, blocked=True, blocked_reason="the DB password")


def test_a_failed_task_skips_what_needs_it_and_the_independent_ones_go_on():
    s = begin(cfg(), planned([None, (), (1,), (0,)], (0, 1, 2, 3)), "base")
    effects = apply(s, RecordKind.ITERATION, blocked(s))
    assert [e.name for e in effects if e.kind == "event"] == ["micro_task_blocked", "micro_task_skipped"]
    assert s.task.mt_id == "MT-002" and s.final is None and s.tasks[3].note == "it needs MT-001, which did not pass"
    assert s.dead == {0, 3}
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    apply(s, RecordKind.ITERATION, rec(s, gate=True))
    assert s.final is not None and s.final.type == cert.BLOCKED and s.final.mt == "MT-001"
    assert [t.status for t in s.tasks] == ["blocked", "completed", "completed", "skipped"]
    assert len(s.final.residual_history) == 3  # the whole run's, not just up to the failure


def test_a_task_only_failed_tasks_checks_accept_is_skipped_and_so_is_what_needs_it():
    s = begin(cfg(), planned([None, (), (1,)], (0,)), "base")
    apply(s, RecordKind.ITERATION, blocked(s))
    assert [t.status for t in s.tasks] == ["blocked", "skipped", "skipped"] and s.final.mt == "MT-001"
    assert s.tasks[1].note.startswith("every check that accepts it") and s.tasks[2].note == (
        "it needs MT-002, which did not pass"
    )


def test_replaying_the_records_reaches_the_same_state_after_a_failure():
    p = planned([None, (), (0,)], (0, 1, 2))
    live = begin(cfg(), p, "base")
    records = [blocked(live)]
    apply(live, RecordKind.ITERATION, records[0])
    records.append(rec(live, gate=True))
    apply(live, RecordKind.ITERATION, records[1])
    again = begin(cfg(), p, "base")
    for r in records:
        apply(again, RecordKind.ITERATION, r)
    assert [t.status for t in again.tasks] == [t.status for t in live.tasks] == ["blocked", "completed", "skipped"]
    assert again.final.to_dict() == live.final.to_dict()
