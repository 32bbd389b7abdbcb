"""Taking queued MPs (mp_engine/queued.py) through `Engine.tick()`, git off."""

from __future__ import annotations

import json

import pytest

from mp_engine.config.load import load_config
from mp_engine.inbox.queue import GIT, SEEN
from mp_engine.pipeline.engine import Engine
from tests.conftest import drop, events, read_state, result_field


@pytest.fixture
def engine(ws, monkeypatch) -> Engine:
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    eng = Engine(ws, load_config(ws.root))
    eng.start(daemon=False)
    return eng


def mp(n: int) -> bytes:
    return f"# MP-8.{n} Queued\n\n```bash\necho {n} >> order.txt\n```\n".encode()


def test_a_git_version_runs_from_the_queue_and_leaves_the_newer_slot_alone(engine, ws):
    engine.inbox.settle = 0
    engine.inbox.queue.add(mp(1), GIT, commit="c1")
    drop(ws, mp(2))
    assert engine.tick().action == "completed"
    assert ws.inbox_file.read_bytes() == mp(2)  # untouched by MP-8.1's run
    assert engine.tick().action == "completed"
    assert (ws.root / "order.txt").read_text() == "1\n2\n" and not ws.inbox_file.exists()
    ledger = json.loads(next(ws.runs_dir.glob("*MP-8.1*/ledger.json")).read_text())
    assert ledger["source"].startswith("queue:") and ledger["inbox_entry"] == "untouched"


def test_a_seen_version_that_left_the_slot_is_superseded_once(engine, ws):
    engine.inbox.settle = 0
    engine.inbox.queue.add(mp(3), SEEN)
    assert engine.tick().action == "superseded"  # removed before it ran
    assert result_field(ws, "Status") == "SUPERSEDED" and "removed from the inbox" in ws.result_file.read_text()
    assert read_state(ws)["status"] == "ONLINE" and not len(engine.inbox.queue)
    assert engine.tick().action == "idle"
    assert [e["mp"] for e in events(ws, "mp_superseded")] == ["MP-8.3"]


def test_an_entry_whose_run_exists_is_not_taken_again(engine, ws):
    """A crash between the claim and the queue update: the run records its source."""
    engine.inbox.settle = 0
    q = engine.inbox.queue.add(mp(4), GIT, commit="c4")
    assert engine.tick().action == "completed"
    index = engine.inbox.queue.index
    data = json.loads(index.read_text())
    data["entries"].append({"id": q.id, "kind": GIT, "sha256": q.sha256, "commit": "c4", "observed_at": ""})
    index.write_text(json.dumps(data))
    q.path.write_bytes(mp(4))
    engine.inbox.queue._count = None
    assert engine.tick().action == "idle"
    assert (ws.root / "order.txt").read_text() == "4\n" and not len(engine.inbox.queue)


def test_an_invalid_queued_version_gets_its_error_result(engine, ws):
    engine.inbox.settle = 0
    engine.inbox.queue.add(b"no header at all\n", GIT, commit="c5")
    assert engine.tick().action == "error"
    assert result_field(ws, "Error-Kind") == "invalid_mp" and not len(engine.inbox.queue)
