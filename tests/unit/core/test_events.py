"""The event log: rotation at a size bound without losing lines (also with two writer
processes), and listeners."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mp_engine.core.events import EventLog


def all_lines(log: EventLog) -> list[dict]:
    """Every kept line, oldest first: the rotated files from the highest number, then the log."""
    out = []
    for p in [*reversed(log.rotated()), log.path]:
        if p.exists():
            out += [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return out


def test_rotation_keeps_every_line_in_order_and_each_file_under_the_bound(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.rotate_at(2000, keep=100, archive_dir=tmp_path / "archive")
    for n in range(300):
        log.emit("tick", seq=n, pad="x" * 20)
    rotated = log.rotated()
    assert len(rotated) >= 5  # it did rotate, many times
    assert all(p.stat().st_size <= 2000 for p in [*rotated, log.path])
    assert [e["seq"] for e in all_lines(log)] == list(range(300))


def test_only_the_newest_files_are_kept(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.rotate_at(1000, keep=2, archive_dir=tmp_path / "archive")
    for n in range(200):
        log.emit("tick", seq=n)
    assert [p.name for p in log.rotated()] == ["events.jsonl.1", "events.jsonl.2"]
    assert not (tmp_path / "archive" / "events.jsonl.3").exists()
    seqs = [e["seq"] for e in all_lines(log)]
    assert seqs == list(range(seqs[0], 200))  # contiguous up to the newest: only the oldest went


WRITER = """
import sys
from pathlib import Path
from mp_engine.core.events import EventLog
log = EventLog(Path(sys.argv[1]))
log.rotate_at(3000, keep=1000, archive_dir=Path(sys.argv[2]))
for n in range(300):
    log.emit("tick", writer=sys.argv[3], seq=n)
"""


def test_two_writer_processes_rotating_the_same_log_lose_no_line(tmp_path):
    path, archive = tmp_path / "events.jsonl", tmp_path / "archive"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(archive), name], stderr=subprocess.DEVNULL)
        for name in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    log = EventLog(path)
    log.rotate_at(3000, keep=1000, archive_dir=archive)
    lines = all_lines(log)
    for name in ("a", "b"):
        seqs = sorted(e["seq"] for e in lines if e["writer"] == name)
        assert seqs == list(range(300)), f"writer {name} lost or duplicated lines"
    assert len(log.rotated()) >= 10


def test_listeners_see_each_record_and_a_failing_one_breaks_nothing(tmp_path: Path):
    log = EventLog(tmp_path / "events.jsonl")
    seen = []

    def broken(_record):
        raise RuntimeError("listener bug")

    log.listeners += [broken, seen.append]
    log.emit("mp_completed", mp="MP-1.0", duration=1.5)
    assert seen == [{"ts": seen[0]["ts"], "event": "mp_completed", "mp": "MP-1.0", "duration": 1.5}]
    assert log.read()[0]["event"] == "mp_completed"


def test_a_runs_own_copy_gets_its_lines_and_secrets_never_reach_either(tmp_path: Path):
    log = EventLog(tmp_path / "events.jsonl", redact=lambda s: s.replace("hunter2", "[REDACTED]"))
    run_copy = tmp_path / "run" / "events.jsonl"
    run_copy.parent.mkdir()
    log.emit("before_the_run")
    log.tee = run_copy
    log.emit("step_finished", note="password hunter2")
    log.tee = None
    log.emit("after_the_run")
    log.sync()
    host = [json.loads(line)["event"] for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert host == ["before_the_run", "step_finished", "after_the_run"]
    own = run_copy.read_text()
    assert json.loads(own)["event"] == "step_finished" and "hunter2" not in own and "[REDACTED]" in own


def test_a_run_copy_that_cannot_be_written_is_dropped_not_fatal(tmp_path: Path):
    log = EventLog(tmp_path / "events.jsonl")
    log.tee = tmp_path / "gone" / "events.jsonl"  # its directory does not exist
    log.emit("still_logged")
    assert log.tee is None and json.loads((tmp_path / "events.jsonl").read_text())["event"] == "still_logged"


def test_sync_fsyncs_the_log_and_its_directory_only_for_a_new_file(tmp_path: Path, monkeypatch):
    """One fsync per sync; the directory the first time, and after a rotation (a new file,
    whose entry must survive a power loss too)."""
    from tests.conftest import fsynced

    log = EventLog(tmp_path / "events.jsonl")
    log.rotate_at(200, 2, tmp_path / "archive")
    (tmp_path / "archive").mkdir()
    log.emit("first")
    calls = fsynced(monkeypatch)
    log.sync()
    log.emit("second")
    log.sync()
    assert calls == [str(log.path), str(tmp_path), str(log.path)]
    calls.clear()
    for i in range(5):
        log.emit("filler", n=i, pad="x" * 50)  # past 200 bytes: rotated
    assert log.rotated()
    calls.clear()
    log.sync()
    assert calls == [str(log.path), str(tmp_path)]
    again = EventLog(log.path)  # the next engine: the file's entry was made durable before it
    again.emit("restarted")
    calls.clear()
    again.sync()
    assert calls == [str(log.path)]
