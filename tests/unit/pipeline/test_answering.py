"""Answering an agent MP that ended asking a person (mp_engine/answering.py, issue #32),
through `Engine.tick()` with a fake agent that asks until it is answered: the same run goes
on, on its branch, and ends EXACT with one commit per task; answers to an MP that waits
for none are refused with the reason."""

from __future__ import annotations

import json

from mp_engine.config.load import load_config
from mp_engine.inbox import answer
from mp_engine.pipeline.engine import Engine
from tests.agentutil import GREET, ONE, configure, level, only_run, records
from tests.conftest import drop, events, read_state, result_field
from tests.gitutil import git

ASKER = level("asker", "asker.py")


def start(ws, monkeypatch, *levels, **opts) -> Engine:
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    configure(ws, list(levels) or [ASKER], **opts)
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def test_the_answer_resumes_the_same_run_which_ends_exact_with_one_commit(ws, monkeypatch):
    engine = start(ws, monkeypatch)
    drop(ws, ONE)
    assert engine.tick().action == "error"
    state = read_state(ws)
    assert state["halt"]["mp_id"] == "MP-3.2" and result_field(ws, "Status") == "ERROR"
    run = only_run(ws)
    asked = json.loads(run.result_json.read_text())["answerable"]
    assert asked["mt"] == "MT-001" and "Which database" in asked["question"]
    assert "mp-engine answer MP-3.2" in ws.result_file.read_text()  # the fix says how to answer
    answer.write_host(ws, "MP-3.2", "PostgreSQL 16.\nThe URL is in DATABASE_URL.")
    assert engine.tick().action == "completed"
    assert only_run(ws).run_id == run.run_id  # the same run
    assert result_field(ws, "Status") == "COMPLETED" and "Certificate: EXACT" in ws.result_file.read_text()
    state = read_state(ws)
    assert state["halt"] is None and state["status"] == "ONLINE" and state["last_result"]["run_id"] == run.run_id
    recs = records(run)
    assert [r["gate"] for r in recs] == [False, True]  # asked, then worked with the answer
    prompt = (run.dir / "agent" / "MT-001" / "iter-002" / "prompt.md").read_text()
    assert "## You asked; a person answered" in prompt and "PostgreSQL 16." in prompt
    subjects = git(ws.root, "log", "--format=%s", "mp/MP-3.2", "-3").splitlines()
    assert subjects[0].startswith("MP-3.2 MT-001:") and "work not yet committed" not in " ".join(subjects)
    (answered,) = events(ws, "mp_answered")
    assert answered["source"] == "host" and answered["mt"] == "MT-001"
    assert not answer.host_path(ws).exists()
    ledger = json.loads(run.ledger_path.read_text())
    assert ledger["answered"][0]["status"] == "ERROR" and ledger["status"] == "closed"


def test_an_answer_to_an_mp_that_waits_for_none_is_refused_with_the_reason(ws, monkeypatch):
    engine = start(ws, monkeypatch, level("good", "good.py"))
    (ws.inbox_dir / answer.ANSWER_FILE).write_text(answer.render("MP-3.2", "PostgreSQL"))
    engine.tick()
    (refused,) = events(ws, "answer_refused")
    assert refused["mp"] == "MP-3.2" and "not halted" in refused["reason"]
    assert not (ws.inbox_dir / answer.ANSWER_FILE).exists()  # consumed
    (ws.inbox_dir / answer.ANSWER_FILE).write_text("Use PostgreSQL\n")
    engine.tick()
    assert "names no MP" in events(ws, "answer_refused")[-1]["reason"]


def test_an_mp_halted_for_a_failure_that_asked_nothing_is_not_answered(ws, monkeypatch):
    engine = start(ws, monkeypatch, level("wrong", "wrong.py"), max_iterations=1)
    drop(ws, ONE)
    assert engine.tick().action == "error"  # TIMEOUT: it ran out of iterations, it asked nothing
    assert read_state(ws)["halt"]["mp_id"] == "MP-3.2"
    answer.write_host(ws, "MP-3.2", "anything")
    engine.tick()
    assert "did not end asking a question" in events(ws, "answer_refused")[-1]["reason"]
    assert read_state(ws)["halt"]["mp_id"] == "MP-3.2"  # still halted: Approves lifts it


def test_an_answer_mp_answers_and_ends_completed_itself_and_the_answered_run_goes_on(ws, monkeypatch):
    engine = start(ws, monkeypatch)
    drop(ws, GREET)  # two tasks: the first asks; the second needs it
    assert engine.tick().action == "error"
    run = only_run(ws)
    drop(ws, "# MP-3.9 The answer\nAnswers: MP-3.1\n\nSQLite is fine here.\n")
    assert engine.tick().action == "completed"  # the answer MP: its work is the answer delivered
    assert read_state(ws)["current"] == "MP-3.1" and read_state(ws)["status"] == "RUNNING"
    assert engine.tick().action == "error"  # MT-001 done with the answer; MT-002 asks in turn
    asked = json.loads(run.result_json.read_text())["answerable"]
    assert asked["mt"] == "MT-002"
    answer.write_host(ws, "MP-3.1", "SQLite here too.", mt="MT-002")
    assert engine.tick().action == "completed"  # the answered run, answered twice
    assert read_state(ws)["last_result"]["mp_id"] == "MP-3.1"
    assert read_state(ws)["last_result"]["run_id"] == run.run_id
    assert "Certificate: EXACT" in ws.result_file.read_text()
    subjects = git(ws.root, "log", "--format=%s", "mp/MP-3.1", "-2").splitlines()
    assert [s.split(":")[0] for s in subjects] == ["MP-3.1 MT-002", "MP-3.1 MT-001"]
    results = [json.loads(line) for line in (ws.system_dir / "results.jsonl").read_text().splitlines()]
    assert [(r["mp_id"], r["status"]) for r in results] == [
        ("MP-3.1", "ERROR"),
        ("MP-3.9", "COMPLETED"),
        ("MP-3.1", "ERROR"),
        ("MP-3.1", "COMPLETED"),
    ]
    assert [e["source"] for e in events(ws, "mp_answered")] == ["mp:MP-3.9", "host"]


def test_tasks_that_ran_at_once_are_answered_one_by_one_and_start_again_from_the_tip(ws, monkeypatch):
    from tests.unit.agent.run.test_scheduler import TWO

    engine = start(ws, monkeypatch, max_parallel=2)
    drop(ws, TWO)  # both tasks ask; the MP ends on the first, MT-001
    assert engine.tick().action == "error"
    run = only_run(ws)
    for mt in ("MT-001", "MT-002"):
        assert json.loads(run.result_json.read_text())["answerable"]["mt"] == mt
        answer.write_host(ws, "MP-9.1", f"go on with {mt}")
        action = engine.tick().action
    assert action == "completed" and "Certificate: EXACT" in ws.result_file.read_text()
    subjects = git(ws.root, "log", "--format=%s", "mp/MP-9.1", "-2").splitlines()
    assert sorted(s.split(":")[0] for s in subjects) == ["MP-9.1 MT-001", "MP-9.1 MT-002"]
