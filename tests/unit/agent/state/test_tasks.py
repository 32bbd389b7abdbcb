"""The decisions about parallel tasks (mp_engine/agent/state/tasks.py), without
processes: what may start, what an integration decides, and the replay of a parallel
run's records (in the order the run applied them) to the same state."""

from __future__ import annotations

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.plan.decompose import decompose
from mp_engine.agent.run.resume import records as ledger_records
from mp_engine.agent.state import ending
from mp_engine.agent.state.apply import apply, replay
from mp_engine.agent.state.kinds import RecordKind
from mp_engine.agent.state.model import RunState
from mp_engine.config.load import load_config
from mp_engine.inbox.mpfile import parse
from tests.agentutil import configure, level, only_run
from tests.unit.agent.run.test_scheduler import NOTES, listed
from tests.unit.agent.state.states import begin

MP = listed(
    'Write "a" to `out/a.txt`. (after none)',
    'Write "b" to `out/b.txt`. (after none)',
    'Write "c" to `out/c.txt`. (after MT-001)',
    checks=[(f"MT-00{n}", f"grep -qx {c} out/{c}.txt") for n, c in enumerate("abc", 1)],
)


def state_for(ws, text: str = MP, **opts) -> RunState:
    configure(ws, [level("fast", "good.py")], max_parallel=3, **opts)
    return begin(load_config(ws.root).agent, decompose(parse(text.encode())), "base", isolated=True)


def start(state: RunState, i: int, seq: int | None = None) -> None:
    rec = {
        "mt": state.tasks[i].mt_id,
        "mt_index": i,
        "base": "b0",
        "digest": "d0",
        "worktree": "w",
        "at": f"2026-11-26T00:00:0{i}.000Z",
        "restart": False,
        "seq": seq,
    }
    apply(state, RecordKind.START, rec)


def passed(state: RunState, i: int, **more) -> dict:
    return {
        "ok": True,
        "gate": True,
        "mt": state.tasks[i].mt_id,
        "mt_index": i,
        "iteration": state.tasks[i].iterations + 1,
        "level": 0,
        "level_name": "fast",
        "call": {"kind": "ok"},
        "claimed": True,
        "blocked": False,
        "status_ok": True,
        "work_type": "code",
        "passed": ["check"],
        "failing": [],
        "residual": 0,
        "error": None,
        "digest": f"d{i}",
        "evidence": "e",
        "at": "2026-11-26T00:00:09.000Z",
        **more,
    }


def integration(state: RunState, i: int, outcome: str = "integrated") -> dict:
    ok = outcome == "integrated"
    return {
        "mt": state.tasks[i].mt_id,
        "mt_index": i,
        "outcome": outcome,
        "attempt": state.tasks[i].integration_failures + 1,
        "commit": "c1" if ok else None,
        "detail": "" if ok else "conflict in x",
        "failing": [],
        "passed": [],
        "checks": [],
        "residual": 0 if ok else 1,
        "call": {"kind": "integration", "detail": ""},
        "claimed": True,
        "gate": False,
        "iteration": 1,
        "level": 0,
        "evidence": "i",
        "at": "2026-11-26T00:00:10.000Z",
    }


def test_what_may_start_needs_passed_work_and_no_shared_files(ws):
    state = state_for(ws)
    assert state.startable(set()) == [0, 1]  # MT-003 needs MT-001
    start(state, 0)
    start(state, 1)
    assert state.startable(set(state.live())) == []
    apply(state, RecordKind.ITERATION, passed(state, 0))
    assert state.tasks[0].status == "accepted"
    assert state.startable(set(state.live())) == []  # accepted is not passed: not integrated yet
    apply(state, RecordKind.INTEGRATE, integration(state, 0))
    assert state.tasks[0].status == "completed" and state.startable(set(state.live())) == [2]


def test_a_pending_planning_round_starts_nothing_and_a_solo_task_runs_alone(ws):
    state = state_for(ws)
    state.campaign.pending = "plan"
    assert state.startable(set()) == []
    state.campaign.pending = None
    state.tasks[1].solo = True
    assert state.startable(set()) == [0]  # the solo task waits for an empty field...
    start(state, 0)
    assert state.startable(set(state.live())) == []
    state.tasks[0].status = "completed"
    state.tasks[2].status = "completed"
    assert state.startable(set()) == [1]  # ...and then runs alone


def test_a_failed_integration_sends_the_task_back_then_alone_then_fails_it(ws):
    state = state_for(ws, max_integration_retries=1)
    start(state, 0)
    for attempt in (1, 2):
        apply(state, RecordKind.ITERATION, passed(state, 0))
        effects = apply(state, RecordKind.INTEGRATE, integration(state, 0, "conflict"))
        assert [e.kind for e in effects][-1] == "refresh" and state.tasks[0].status == "active"
        assert state.tasks[0].refresh_due and state.tasks[0].integration_failures == attempt
        start(state, 0)
        assert state.tasks[0].records[-1]["outcome"] == "conflict"  # read like a failed iteration
    assert state.tasks[0].solo  # 2 failures > max_integration_retries (1)
    apply(state, RecordKind.ITERATION, passed(state, 0))
    apply(state, RecordKind.INTEGRATE, integration(state, 0, "conflict"))
    assert state.tasks[0].status == "failed" and state.failures[0].reason == "integration"
    assert state.tasks[2].status == "skipped"  # it needs MT-001


def test_a_run_wide_end_stops_every_live_task(ws):
    state = state_for(ws)
    start(state, 0)
    start(state, 1)
    ending.end(state, cert.TIMEOUT, "wall_budget", "spent")
    assert state.final.type == cert.TIMEOUT and state.final.mt is None
    assert [t.status for t in state.tasks] == ["failed", "failed", "pending"]


def test_the_run_ends_when_nothing_is_pending_or_live(ws):
    state = state_for(ws)
    for i in (0, 1):
        start(state, i)
        apply(state, RecordKind.ITERATION, passed(state, i))
        apply(state, RecordKind.INTEGRATE, integration(state, i))
    start(state, 2)
    apply(state, RecordKind.ITERATION, passed(state, 2))
    assert state.final is None
    apply(state, RecordKind.INTEGRATE, integration(state, 2))
    assert state.final is not None and state.final.type == cert.EXACT


def test_replaying_a_parallel_run_in_the_order_it_applied_its_records_gives_its_state(ws, tmp_path, monkeypatch):
    """A real run with a conflict (tests/unit/agent/run/test_scheduler.py); its ledger replayed
    into a fresh state gives the state the run ended with."""
    from mp_engine.agent.progress import Progress
    from mp_engine.pipeline.engine import Engine
    from tests.conftest import drop

    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    (ws.root / "notes.txt").write_text("start\n")
    configure(ws, [level("fast", "good.py", "--sleep", "0.3")], max_parallel=2)
    engine = Engine(ws, load_config(ws.root))
    engine.start(daemon=False)
    text = NOTES
    drop(ws, text)
    assert engine.tick().action == "completed"
    run = only_run(ws)
    live = Progress.load(run.dir).data["micro_tasks"]
    again = begin(load_config(ws.root).agent, decompose(parse(text.encode())), "base", isolated=True)
    replay(again, ledger_records(run.ledger(), run.steps_dir))
    assert again.final is not None and again.final.type == cert.EXACT
    replayed = [t.to_dict() for t in again.tasks]
    ending.overlaps(again)
    for mine, theirs in zip(replayed, live, strict=True):
        assert {k: v for k, v in mine.items() if k != "overlapped_with"} == {
            k: v for k, v in theirs.items() if k not in ("commit", "overlapped_with")
        }
    assert again.integrations == 3  # MT-001, MT-002's conflict, MT-002
    from tests.agentutil import records

    assert again.applied >= max(r["seq"] for r in records(run))  # every record applied, in its order
