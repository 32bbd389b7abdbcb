"""The streams' look at the workspace: a change of a watched file, or the refresh, wakes
it; one watcher feeds every stream, one render each time, and the streams are capped per
client and in all."""

from __future__ import annotations

import asyncio
import threading

import anyio

from mp_engine.web.live import Feed, Watch


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


def test_one_watcher_feeds_every_stream_and_the_caps_hold(ws):
    renders: list[int] = []
    stop = threading.Event()

    async def render():
        renders.append(1)
        return {"state": {"run_id": None}}, f"event {len(renders)}"

    async def main():
        feed = Feed(Watch(ws, refresh=3600), render, tick=0.01, stop=stop, per_client=2, total=3)
        a, b = feed.join("10.0.0.1"), feed.join("10.0.0.1")
        assert feed.join("10.0.0.1") is None  # its two
        c = feed.join("10.0.0.2")
        assert feed.join("10.0.0.3") is None  # three in all
        got = [await asyncio.wait_for(q.get(), 5) for _, q in (a, b, c)]
        assert got == ["event 1"] * 3 and len(renders) == 1  # one render for all three
        ws.state_file.write_text(ws.state_file.read_text() + " ")
        got = [await asyncio.wait_for(q.get(), 5) for _, q in (a, b, c)]
        assert got == ["event 2"] * 3 and len(renders) == 2
        feed.leave(a[0])
        late = feed.join("10.0.0.1")
        assert late is not None and late[1].get_nowait() == "event 2"  # the last event at once
        stop.set()
        ends = [await asyncio.wait_for(q.get(), 5) for _, q in (b, c, late)]
        assert ends == [None] * 3  # the server stops: every stream ends

    anyio.run(main)
