"""SESSION_STATE.json: validated, atomically written, each transition logged once."""

from __future__ import annotations

import json
import os

import pytest

from mp_engine.core.errors import StateError
from mp_engine.core.events import EventLog
from mp_engine.record.state import Halt, StateStore, Status
from tests.conftest import events


@pytest.fixture
def store(ws) -> StateStore:
    return StateStore(ws.state_file, EventLog(ws.events_file))


def test_update_writes_valid_json_and_logs_the_transition(ws, store):
    store.update(status=Status.RUNNING, current="MP-1.0", run_id="r1", reason="MP claimed")
    data = json.loads(ws.state_file.read_text())
    assert (data["status"], data["current"], data["run_id"]) == ("RUNNING", "MP-1.0", "r1")
    changed = events(ws, "state_changed")
    assert changed[-1]["to_status"] == "RUNNING" and changed[-1]["reason"] == "MP claimed"


def test_a_write_that_changes_neither_status_nor_current_is_not_logged(ws, store):
    store.update(status=Status.RUNNING, current="MP-1.0")
    before = len(events(ws, "state_changed"))
    store.update(run_id="r2")
    assert len(events(ws, "state_changed")) == before


def test_a_halt_round_trips_as_a_model(store):
    store.update(halt=Halt(mp_id="MP-1.0", run_id="r1", reason="exit 1", since="2026-01-01T00:00:00.000Z"))
    assert store.read().halt == Halt(mp_id="MP-1.0", run_id="r1", reason="exit 1", since="2026-01-01T00:00:00.000Z")


def test_another_writer_is_always_seen(ws, store):
    store.update(current="MP-1.0")
    data = json.loads(ws.state_file.read_text())
    data["current"] = "MP-9.9"  # `mp-engine approve` in another process, say
    tmp = ws.state_file.with_name("x.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, ws.state_file)
    assert store.read().current == "MP-9.9"


@pytest.mark.parametrize(
    ("content", "match"),
    [("{not json", "not valid JSON"), ('{"status": "DANCING"}', "valid MP-1.3 fields")],
)
def test_a_damaged_state_file_says_how_to_restore_it(ws, store, content, match):
    ws.state_file.write_text(content)
    with pytest.raises(StateError, match=match) as e:
        store.read()
    assert "git" in str(e.value)


def test_a_missing_state_file_says_to_init(ws, store):
    ws.state_file.unlink()
    with pytest.raises(StateError, match="mp-engine init"):
        store.read()


def test_every_state_write_fsyncs_its_content_and_only_a_durable_one_its_directory(ws, store, monkeypatch):
    """The state file is never torn or empty after a power loss; `durable=False` (the
    engine's start and stop, the claim) leaves the rename to the next durable write."""
    from mp_engine.core.atomic import TEMP_MARKER
    from tests.conftest import fsynced

    calls = fsynced(monkeypatch)
    store.update(status=Status.RUNNING, current="MP-1.0", reason="claimed", durable=False)
    assert len(calls) == 1 and TEMP_MARKER in calls[0]
    store.update(status=Status.ONLINE, current="IDLE", reason="done")
    assert len(calls) == 3 and TEMP_MARKER in calls[1] and calls[2] == str(ws.root)
    assert json.loads(ws.state_file.read_text())["status"] == "ONLINE"
