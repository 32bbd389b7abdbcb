"""`mp-engine history`: one line per run, newest first, open runs included."""

from __future__ import annotations

import json

from mp_engine.commands.history import history_command, render_history
from mp_engine.record.archive import create_run
from mp_engine.record.outcome import Outcome
from mp_engine.record.result import write_result
from mp_engine.views.history import history


def finished(ws, mp_id: str, status: str, title: str = "t", cert: str | None = None):
    run, ledger = create_run(ws, mp_id=mp_id, data=b"x", mp_sha256="s", executor="shell")
    extra = {"certificate": {"type": cert}} if cert else {}
    o = Outcome(
        status, mp_id, title, run.run_id, "s", "2026-11-24T10:00:00.000Z", "2026-11-24T10:00:02.000Z", 2.0, extra=extra
    )
    write_result(ws, run, o)
    ledger.close()
    return run


def test_newest_first_with_open_runs_and_certificates(ws):
    finished(ws, "MP-1.0", "COMPLETED")
    finished(ws, "MP-1.1", "ERROR", title="x" * 60, cert="TIMEOUT")
    create_run(ws, mp_id="MP-1.2", data=b"x", mp_sha256="s", executor="agent")
    entries = history(ws)
    assert [e["mp_id"] for e in entries] == ["MP-1.2", "MP-1.1", "MP-1.0"]
    assert entries[0]["status"] == "OPEN" and entries[1]["certificate"] == "TIMEOUT"
    text = render_history(entries)
    assert text.splitlines()[0].startswith("MP ") and "x" * 39 + "…" in text and "2.0s" in text
    assert [e["mp_id"] for e in history(ws, 1)] == ["MP-1.2"]


def test_json_and_an_empty_archive(ws):
    lines: list[str] = []
    history_command(ws.root, 5, False, lines.append)
    assert lines == ["no MPs in the run archive yet"]
    finished(ws, "MP-2.0", "COMPLETED")
    lines.clear()
    history_command(ws.root, 5, True, lines.append)
    assert json.loads(lines[0])[0]["status"] == "COMPLETED"


def test_an_older_engine_s_archive_is_listed_with_its_certificate(ws):
    """Before issue #44 result.json held the outcome, its certificate under `extra`."""
    run = finished(ws, "MP-3.0", "ERROR", cert="BUDGET")
    o = Outcome(
        "ERROR",
        "MP-3.0",
        "t",
        run.run_id,
        "s",
        "2026-11-24T10:00:00.000Z",
        "2026-11-24T10:00:02.000Z",
        2.0,
        extra={"certificate": {"type": "BUDGET"}},
    )
    run.result_json.write_text(json.dumps(o.to_dict()))
    (entry,) = history(ws)
    assert (entry["mp_id"], entry["status"], entry["certificate"], entry["duration"]) == (
        "MP-3.0",
        "ERROR",
        "BUDGET",
        2.0,
    )
