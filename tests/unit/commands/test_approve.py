"""`mp-engine approve` on the engine host."""

from __future__ import annotations

from mp_engine.commands.approve import approve
from mp_engine.commands.once import once
from mp_engine.core.exitcodes import ExitCode
from tests.conftest import drop, events, read_state


def test_approve_without_a_halt_changes_nothing(ws):
    before = read_state(ws)
    lines: list[str] = []
    assert approve(ws.root, lines.append) == ExitCode.OK
    assert lines == ["the engine is not halted; nothing to approve"]
    assert read_state(ws)["status"] == before["status"] and read_state(ws).get("halt") is None


def test_approve_lifts_a_halt_and_says_which(ws, monkeypatch):
    monkeypatch.setenv("MP_ENGINE_ENGINE__SETTLE_SECONDS", "0")
    drop(ws, "# MP-1.3\n```bash\nexit 4\n```\n")
    assert once(ws.root, lambda _: None) == ExitCode.MP_ERROR
    assert read_state(ws)["halt"]["mp_id"] == "MP-1.3"
    lines: list[str] = []
    approve(ws.root, lines.append)
    assert lines == ["approved: the halt on MP-1.3 is lifted"]
    state = read_state(ws)
    assert state.get("halt") is None and state["status"] == "OFFLINE"  # no daemon runs
    last = events(ws, "approved")[-1]
    assert (last["via"], last["approved"]) == ("cli", "MP-1.3")
