"""The dashboard's documents (docs/PROTOCOL.md §9) from real runs through `Engine.tick()`:
a finished agent MP (its board, evidence, usage and per-level statistics), a halt with its
fix and the commands that lift it, a question to answer, and the queue."""

from __future__ import annotations

from mp_engine.config.load import load_config
from mp_engine.inbox.queue import MPQueue
from mp_engine.web.app import Dashboard
from mp_engine.web.documents import SCHEMA, Documents
from tests.agentutil import GREET, ONE, level, only_run
from tests.conftest import drop

ASKER = level("asker", "asker.py")


def docs_for(ws) -> Documents:
    return Documents(
        ws, load_config(ws.root).model_dump(mode="json"), redact=lambda s: s.replace("sekrit", "[REDACTED]")
    )


def test_a_finished_agent_mp_in_the_runs_and_its_own_document(engine_for, ws):
    engine = engine_for([level("cheap", "good.py", "--cost", "0.01")])
    drop(ws, GREET)
    assert engine.tick().action == "completed"
    docs = docs_for(ws)
    runs = docs.runs(10)
    assert runs["schema"] == SCHEMA and [r["mp_id"] for r in runs["runs"]] == ["MP-3.1"]
    st = runs["stats"]
    assert st["outcomes"] == {"COMPLETED": 1} and st["success_rate"] == 1.0
    assert st["levels"] == {"cheap": {"reached": 2, "finished": 2, "rate": 1.0}}
    assert st["usage"] == {"input": 2400, "output": 60, "cost_usd": 0.02}
    run = docs.run(only_run(ws).run_id)
    assert run["finished"] and run["result"]["status"] == "COMPLETED"
    tasks = run["agent"]["tasks"]
    assert [t["mt_id"] for t in tasks] == ["MT-001", "MT-002"] and tasks[1]["after"] == ["MT-001"]
    assert "out/" in tasks[0]["evidence_last"]["diffstat"] and tasks[0]["evidence_last"]["failing"] == []
    assert run["agent"]["usage"]["calls"] == 2 and run["agent"]["certificate"]["type"] == "EXACT"
    assert run["result"]["schema"] == "mp-engine/result/1" and run["result"]["work"]["branch"] == "mp/MP-3.1"
    assert docs.run("../etc") is None and docs.run("no-such-run") is None
    state = docs.state()
    assert state["state"]["status"] == "ONLINE" and state["last_mp"]["mp_id"] == "MP-3.1" and state["actions"] == []


def test_a_halt_shows_its_diagnosis_fix_and_the_commands_that_lift_it(engine_for, ws):
    engine = engine_for([level("cheap", "good.py")])
    drop(ws, "# MP-5.1 Fails\n\n```bash\necho sekrit >&2; exit 3\n```\n")
    assert engine.tick().action == "error"
    doc = docs_for(ws).state()
    halt = doc["halt"]
    assert halt["mp_id"] == "MP-5.1" and halt["title"] == "Fails" and halt["fix"] and halt["summary"]
    assert halt["question"] is None
    commands = [a["command"] for a in doc["actions"]]
    assert commands[0].startswith("mp-engine approve") and "Approves: MP-5.1" in commands[1]


def test_a_question_is_shown_with_the_answer_command(engine_for, ws):
    engine = engine_for([ASKER])
    drop(ws, ONE)
    assert engine.tick().action == "error"
    doc = docs_for(ws).state()
    assert doc["halt"]["question"]["question"].endswith("Which database should the service use?")
    assert doc["halt"]["question"]["mt"] == "MT-001" and "mp-engine answer MP-3.2" in doc["halt"]["fix"]
    assert (
        doc["actions"][0]["command"].startswith("mp-engine answer")
        and 'MP-3.2 "YOUR ANSWER"' in doc["actions"][0]["command"]
    )


def test_the_queue_and_the_slot(ws):
    MPQueue(ws.local_dir / "queue").add(b"# MP-6.1 Queued one\n\n```bash\ntrue\n```\n", "git", commit="abc")
    drop(ws, "# MP-6.2 <b>In the slot</b>\n\n```bash\ntrue\n```\n")
    doc = docs_for(ws).state()
    assert [(q["mp_id"], q["title"], q["kind"]) for q in doc["queue"]] == [("MP-6.1", "Queued one", "git")]
    assert doc["pending"]["mp_id"] == "MP-6.2" and doc["pending"]["title"] == "<b>In the slot</b>"
    assert "running" not in doc and doc["heartbeat"]["state_written_at"]


def test_the_queue_lists_each_mp_once_and_a_replaced_one_as_superseded(ws):
    # issue #44: a version still in the slot was listed twice (queued, and as the inbox
    # file); one replaced there before it ran was listed as queued, yet ends SUPERSEDED.
    queue = MPQueue(ws.local_dir / "queue")
    replaced = b"# MP-6.3 Replaced\n\n```bash\ntrue\n```\n"
    waiting = b"# MP-6.4 Waiting\n\n```bash\ntrue\n```\n"
    queue.add(replaced, "seen")
    queue.add(waiting, "seen")
    drop(ws, waiting)
    doc = docs_for(ws).state()
    assert [(q["mp_id"], q["superseded"]) for q in doc["queue"]] == [("MP-6.3", True)]
    assert doc["pending"]["mp_id"] == "MP-6.4"
    page = Dashboard(docs_for(ws)).fragments(doc)["queue"]
    assert page.count("MP-6.4") == 1 and "ends SUPERSEDED" in page and "queued (seen)" not in page


def test_with_git_on_the_state_has_the_channel_the_last_sync_and_the_heartbeat(tmp_path):
    from tests.gitutil import engine_workspace, make_remote

    ws = engine_workspace(tmp_path, f"file://{make_remote(tmp_path)}")
    doc = Documents(ws, load_config(ws.root).model_dump(mode="json")).state()
    assert doc["git"]["branch"] == "main" and doc["git"]["unpushed"] == 0 and "error" not in doc["git"]
    assert doc["last_sync"] == {"at": None, "age": None}
    assert doc["heartbeat"]["pushed_at"] is None and doc["heartbeat"]["interval"] == 300.0


def test_the_archive_is_listed_again_only_when_its_directory_changed(ws, monkeypatch):
    """Issue #45 (bench figure 25): at 10,000 runs, listing SYSTEM/runs was most of what a
    history page cost. The names are kept until the directory's mtime moves; a listing
    taken just after a change is not kept (a second change in the same tick)."""
    import os

    from mp_engine.web import documents

    listed = []
    real = documents.run_names
    monkeypatch.setattr(documents, "run_names", lambda w: listed.append(1) or real(w))
    for n in (1, 2):
        (ws.runs_dir / f"20260101T00000{n}Z-MP-8.{n}").mkdir(parents=True)
    old = os.stat(ws.runs_dir).st_mtime_ns - 10 * documents.RACY_NS
    os.utime(ws.runs_dir, ns=(old, old))
    d = docs_for(ws)
    assert d.runs(10)["total"] == 2 and d.runs(10)["total"] == 2 and len(listed) == 1
    (ws.runs_dir / "20260101T000003Z-MP-8.3").mkdir()  # now: its mtime is racy, so it is listed each time
    assert [d.runs(10)["total"], d.runs(10)["total"]] == [3, 3] and len(listed) == 3
    os.utime(ws.runs_dir, ns=(old + 1, old + 1))
    assert [r["run_id"] for r in d.runs(10)["runs"]][0].endswith("MP-8.3") and d.runs(1)["total"] == 3
    assert len(listed) == 4
