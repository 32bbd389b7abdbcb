"""`mp-engine logs`: readable lines, history across rotated files, and `-f` across rotation."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from mp_engine.cli.main import main
from mp_engine.commands.logs import render_event
from mp_engine.core.events import EventLog
from tests.conftest import wait_for


def test_render_event_is_one_readable_line():
    line = render_event('{"ts": "2026-11-22T15:16:00.123Z", "event": "mp_failed", "mp": "MP-1.5", "summary": "exit 3"}')
    assert line == '2026-11-22 15:16:00.123  mp_failed            mp=MP-1.5 summary="exit 3"'
    assert render_event("not json") == "not json"


def rotating_log(ws) -> EventLog:
    log = EventLog(ws.events_file)
    log.rotate_at(1500, keep=5, archive_dir=ws.local_dir)
    return log


def test_logs_shows_the_last_lines_reaching_into_rotated_files(ws, capsys):
    log = rotating_log(ws)
    for n in range(60):
        log.emit("tick", seq=n)
    assert log.rotated()  # the last 25 lines span more than the current file
    capsys.readouterr()  # the emits above logged to stdout
    assert main(["logs", "--root", str(ws.root), "-n", "25"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.rsplit("seq=", 1)[1] for line in out] == [str(n) for n in range(35, 60)]
    assert out[0].split()[2] == "tick"


def test_logs_follow_keeps_every_line_across_rotation(ws, tmp_path, monkeypatch):
    # A burst of 200 events rotates the 1500-byte log a dozen times between two looks of the
    # follower; it reads every rotated file it missed (up to `events_keep` of them).
    monkeypatch.setenv("MP_ENGINE_ENGINE__EVENTS_KEEP", "50")
    log = EventLog(ws.events_file)
    log.rotate_at(1500, keep=50, archive_dir=ws.local_dir)
    log.emit("marker", seq=-1)
    out_path = tmp_path / "follow.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mp_engine", "logs", "-f", "-n", "1", "--json", "--root", str(ws.root)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: '"marker"' in out_path.read_text(), what="the follower to print the last line")
        for n in range(200):
            log.emit("tick", seq=n, pad="y" * 30)
        assert len(log.rotated()) >= 8

        def seqs() -> list[int]:
            import json

            return [json.loads(line)["seq"] for line in out_path.read_text().splitlines() if line.startswith("{")]

        wait_for(lambda: seqs()[-1] == 199, what=lambda: f"the follower to reach seq 199; got {seqs()[-5:]}")
        assert seqs() == [-1, *range(200)]  # nothing lost, nothing twice, in order
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_last_lines_of_a_big_log_are_read_from_its_end(ws):
    """Issue #45 (bench figure 25): `logs -n 50` read the whole current log, 10 MiB after
    weeks of operation, to show its last 50 lines. It reads blocks from the end now."""
    import tracemalloc

    from mp_engine.commands.logs import last_lines

    line = '{"ts": "2026-11-28T12:00:00.000Z", "event": "tick", "seq": %d, "pad": "' + "x" * 150 + '"}\n'
    with open(ws.events_file, "w") as f:
        f.writelines(line % n for n in range(60_000))  # about 10 MiB
    tracemalloc.start()
    try:
        got = last_lines(ws.events_file, 50)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [json.loads(x)["seq"] for x in got] == list(range(59_950, 60_000))
    assert peak < 1024 * 1024, peak  # the whole file would be 10 MiB, twice over once decoded
    assert [json.loads(x)["seq"] for x in last_lines(ws.events_file, 3, upto=len(line % 0) * 10)] == [7, 8, 9]
