"""SESSION_STATE.json read without pydantic, for `status`: the same fields as the model."""

from __future__ import annotations

import pytest

from mp_engine.core.errors import StateError
from mp_engine.core.events import EventLog
from mp_engine.record.state import Halt, StateStore, Status
from mp_engine.record.stateview import read_view


def test_the_view_reads_what_the_store_wrote(ws):
    store = StateStore(ws.state_file, EventLog(ws.events_file))
    halt = Halt(mp_id="MP-1.2", run_id="r1", reason="exit 1 in step 1", since="2026-11-24T00:00:00.000Z")
    store.update(status=Status.ERROR, current="MP-1.2", halt=halt, reason="test")
    view, model = read_view(ws.state_file), store.read()
    assert view.to_json() == model.to_json()
    assert (view.status, view.halt.mp_id, view.halt.reason) == ("ERROR", "MP-1.2", "exit 1 in step 1")


@pytest.mark.parametrize(("content", "says"), [(None, "is missing"), ("{", "not valid JSON"), ("[]", "MP-1.3 fields")])
def test_a_bad_state_file_says_what_to_do(ws, content, says):
    if content is None:
        ws.state_file.unlink()
    else:
        ws.state_file.write_text(content)
    with pytest.raises(StateError, match=says):
        read_view(ws.state_file)
