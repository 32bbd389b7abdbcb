"""The one atomic-write helper: readers never see a torn file, crashes leave no debris."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess

from mp_engine.core.atomic import TEMP_MARKER, append_durable, atomic_write, atomic_write_json, sweep_temp_files
from tests.conftest import dead_pid


def _writer(path: str, rounds: int) -> None:
    for i in range(rounds):
        atomic_write_json(path, {"i": i, "pad": "x" * (i % 4096)})


def test_concurrent_reader_never_sees_a_torn_file(tmp_path):
    path = tmp_path / "state.json"
    atomic_write_json(path, {"i": -1})
    proc = multiprocessing.get_context("spawn").Process(target=_writer, args=(str(path), 400))
    proc.start()
    reads = 0
    while proc.is_alive() or reads == 0:
        data = json.loads(path.read_text())  # raises on a torn or empty file
        assert "i" in data
        reads += 1
    proc.join()
    assert proc.exitcode == 0
    assert json.loads(path.read_text())["i"] == 399
    assert not [p for p in tmp_path.iterdir() if TEMP_MARKER in p.name]


def test_failed_write_leaves_target_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    atomic_write(path, "old")

    def boom(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    try:
        atomic_write(path, "new")
    except OSError:
        pass
    monkeypatch.undo()
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_atomic_write_replaces_a_symlink_instead_of_writing_through_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    link = tmp_path / "link.txt"
    link.symlink_to(outside)
    atomic_write(link, "new")
    assert outside.read_text() == "precious"
    assert not link.is_symlink() and link.read_text() == "new"


def test_sweep_removes_only_temp_files_of_dead_writers(tmp_path):
    dead = f".state.json{TEMP_MARKER}{dead_pid()}-abcd"
    (tmp_path / dead).write_text("partial")
    (tmp_path / "keep.txt").write_text("keep")
    # A live writer (another engine on this root) may be between open() and rename().
    with subprocess.Popen(["sleep", "30"]) as live:
        try:
            in_flight = f".state.json{TEMP_MARKER}{live.pid}-beef"
            (tmp_path / in_flight).write_text("being written")
            removed = sweep_temp_files(tmp_path)
        finally:
            live.kill()
    assert [p.name for p in removed] == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["keep.txt", in_flight])


def test_append_durable_adds_whole_lines(tmp_path):
    path = tmp_path / "events.jsonl"
    append_durable(path, '{"a": 1}')
    append_durable(path, '{"b": 2}\n')
    assert path.read_text().splitlines() == ['{"a": 1}', '{"b": 2}']


def test_make_durable_and_fsync_dir_accept_what_was_written(tmp_path):
    from mp_engine.core.atomic import fsync_dir, make_durable

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1")
    b.write_text("2")
    make_durable(a, b, tmp_path)  # files and their directory, in one round
    fsync_dir(tmp_path)
    assert a.read_text() == "1" and b.read_text() == "2"


def test_sha256_file_and_read_tail(tmp_path):
    import hashlib

    from mp_engine.core.atomic import read_tail, sha256_file

    f = tmp_path / "big"
    f.write_bytes(b"a" * (3 << 20) + b"END")  # over one read chunk
    assert sha256_file(f) == hashlib.sha256(f.read_bytes()).hexdigest()
    assert sha256_file(tmp_path / "missing") == ""
    assert read_tail(f, 3) == "END" and read_tail(tmp_path / "missing", 3) == ""
    f.write_bytes(b"short")
    assert read_tail(f, 100) == "short"


def test_atomic_write_of_a_stream_writes_every_chunk_or_nothing(tmp_path):
    path = tmp_path / "out.log"
    atomic_write(path, (f"line {i}\n".encode() for i in range(3)))
    assert path.read_text() == "line 0\nline 1\nline 2\n"

    def broken():
        yield b"half a file"
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    try:
        atomic_write(path, broken())
    except UnicodeDecodeError:
        pass
    assert path.read_text() == "line 0\nline 1\nline 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.log"]


def test_a_write_without_dir_sync_still_fsyncs_its_content_before_the_rename(tmp_path, monkeypatch):
    """`dir_sync=False`: never a torn or empty file after a power loss (the content is on
    disk before the rename), though the rename itself may be undone."""
    from tests.conftest import fsynced

    path = tmp_path / "state.json"
    calls = fsynced(monkeypatch)
    atomic_write_json(path, {"a": 1}, dir_sync=False)
    assert len(calls) == 1 and f".state.json{TEMP_MARKER}" in calls[0]
    atomic_write_json(path, {"a": 2})  # the default: the content, then the directory
    assert len(calls) == 3 and TEMP_MARKER in calls[1] and calls[2] == str(tmp_path)
    assert json.loads(path.read_text()) == {"a": 2}


def test_make_durable_fsyncs_each_path_and_a_directory_not_twice(tmp_path, monkeypatch):
    from mp_engine.core.atomic import make_durable
    from tests.conftest import fsynced

    run = tmp_path / "run"
    run.mkdir()
    (run / "a").write_text("1")
    calls = fsynced(monkeypatch)
    make_durable(run / "a", run)  # the run's directory is a path: not fsynced again as a parent
    assert calls == [str(run / "a"), str(run), str(tmp_path)]
