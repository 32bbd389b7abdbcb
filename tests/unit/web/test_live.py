"""The stream's look at the workspace: a change of a watched file, or the refresh, wakes it."""

from __future__ import annotations

from mp_engine.web.live import Watch


def test_a_written_state_file_wakes_the_stream_and_a_quiet_workspace_does_not(ws):
    w = Watch(ws, refresh=3600)
    assert w.changed()  # the first look always sends
    w.follow({"state": {"run_id": None}})
    assert not w.changed()
    ws.state_file.write_text(ws.state_file.read_text() + " ")
    assert w.changed()


def test_it_follows_the_running_runs_outputs(ws):
    run = ws.runs_dir / "r1"
    (run / "steps").mkdir(parents=True)
    w = Watch(ws, refresh=3600)
    w.follow({"state": {"run_id": "r1"}, "step": {"id": "step-001"}})
    assert not w.changed()
    (run / "steps" / "step-001.stdout").write_text("a line\n")
    assert w.changed()
    w.follow({"state": {"run_id": "r1"}, "step": {"id": "step-001"}})
    assert not w.changed() and Watch(ws, refresh=0).changed()
