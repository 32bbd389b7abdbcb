"""The table of reducers (mp_engine/agent/state/apply.py): every record kind has one, a run
that ended takes only an answer, a record that says the CLI cannot work is FATAL whatever
its step, and replay applies records in their order."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.state.apply import REDUCERS, apply, kind_of, replay
from mp_engine.agent.state.kinds import REPLAYED, RecordKind, TaskStatus
from tests.unit.agent.state.states import begin
from tests.unit.agent.state.test_iteration import cfg, plan, rec

FATAL = {"fatal": {"reason": "agent_auth", "detail": "not logged in", "fix": "log in"}, "mt_index": None}


def test_every_kind_of_record_has_its_reducer_and_every_replayed_step_kind_is_one():
    assert set(REDUCERS) == set(RecordKind)
    assert REPLAYED == {k.value for k in RecordKind} - {"fatal"}


def test_a_record_that_says_the_cli_cannot_work_is_fatal_whatever_its_step():
    assert kind_of("agent", FATAL) is RecordKind.FATAL and kind_of("plan", FATAL) is RecordKind.FATAL
    assert kind_of("agent", {"mt": "MT-001"}) is RecordKind.ITERATION
    s = begin(cfg(), plan(2), "base")
    apply(s, RecordKind.FATAL, FATAL)
    assert s.final.type == cert.BLOCKED and s.final.reason == "agent_auth" and s.fatal_fix == "log in"
    assert s.tasks[0].status is TaskStatus.BLOCKED


def test_a_run_that_ended_takes_only_an_answer():
    s = begin(cfg(), plan(1), "base")
    late = rec(s, gate=True)  # an iteration whose record comes after the end
    apply(s, RecordKind.ITERATION, rec(s, blocked=True, blocked_reason="which database?"))
    ended = s.final
    assert ended is not None and ended.reason == "agent_blocked"
    assert apply(s, RecordKind.ITERATION, late) == [] and s.final is ended and s.total == 1
    answer = {"mt": "MT-001", "question": "which database?", "answer": "SQLite", "source": "host"}
    assert [e.name for e in apply(s, RecordKind.ANSWER, answer)] == ["micro_task_answered"]
    assert s.final is None and s.tasks[0].status is TaskStatus.ACTIVE
    assert s.tasks[0].answers == [{"question": "which database?", "answer": "SQLite"}]


def test_replay_gives_the_state_the_live_run_had():
    live, log = begin(cfg(fail_threshold=2), plan(2), "base"), []
    while live.final is None:
        r = rec(live, gate=live.total % 3 == 2)
        log.append(("agent", r))
        apply(live, RecordKind.ITERATION, r)
    again = begin(cfg(fail_threshold=2), plan(2), "base")
    replay(again, log)
    assert [t.to_dict() for t in again.tasks] == [t.to_dict() for t in live.tasks]
    assert (again.final, again.total, again.escalations, again.drop_backs, again.history) == (
        live.final,
        live.total,
        live.escalations,
        live.drop_backs,
        live.history,
    )
