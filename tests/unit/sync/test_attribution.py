"""Attribution: which changed paths a run's commit carries, from one real `git status`."""

from __future__ import annotations

import os

import pytest

import mp_engine.sync.attribution as attribution
from mp_engine.sync.attribution import PROTOCOL_FILES, changes, file_clock_ns, fingerprint, new_baseline, select
from mp_engine.sync.session import GitSession
from tests.conftest import wait_for
from tests.gitutil import git


@pytest.fixture
def repo(ws):
    git(ws.root, "init", "-q", "-b", "main")
    git(ws.root, "add", "-A")
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "layout")
    s = GitSession(ws.root, 30)
    yield ws, s
    s.close()


def later(ws_or_dir) -> None:
    """Wait until the kernel's coarse file clock (a tick of a few ms) has moved on."""
    where = getattr(ws_or_dir, "local_dir", ws_or_dir)
    now = file_clock_ns(where)
    wait_for(lambda: file_clock_ns(where) > now, what="the file clock to tick")


def test_the_run_carries_what_it_wrote_and_the_operators_edit_stays(repo):
    ws, s = repo
    (ws.root / "notes.txt").write_text("the operator's, before the run\n")
    before = select(ws.root, changes(s, ws.root), None)[1]
    assert list(before) == ["notes.txt"]  # no run: everything stays local
    later(ws)
    baseline = new_baseline(ws.local_dir, before)
    later(ws)
    (ws.root / "out").mkdir()
    (ws.root / "out" / "made.txt").write_text("by the run\n")
    paths, left = select(ws.root, changes(s, ws.root), baseline)
    assert "out/" in paths and "notes.txt" not in paths and "notes.txt" in left


def test_a_file_the_run_only_touched_keeps_the_operators_content_local(repo):
    ws, s = repo
    (ws.root / "notes.txt").write_text("edit\n")
    dirty = select(ws.root, changes(s, ws.root), None)[1]
    later(ws)
    baseline = new_baseline(ws.local_dir, dirty)
    later(ws)
    os.utime(ws.root / "notes.txt")  # touched (ctime moves), content unchanged
    (ws.root / "notes.txt").write_text("edit\n")
    assert "notes.txt" not in select(ws.root, changes(s, ws.root), baseline)[0]
    (ws.root / "notes.txt").write_text("edit, then the run's own change\n")
    assert "notes.txt" in select(ws.root, changes(s, ws.root), baseline)[0]


def test_protocol_files_always_travel_and_engine_files_never(repo):
    ws, s = repo
    for rel in PROTOCOL_FILES:
        (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws.root / rel).write_text("changed\n")
    (ws.root / "mp-engine.toml").write_text("# edited\n")
    (ws.local_dir / "gitsync.json").write_text("{}")
    paths, left = select(ws.root, changes(s, ws.root), None)
    assert sorted(p for p in paths) == sorted(PROTOCOL_FILES)
    assert "mp-engine.toml" not in paths and "mp-engine.toml" not in left


def test_only_the_engines_removal_of_the_inbox_file_travels(repo):
    ws, s = repo
    ws.inbox_file.write_text("# MP-1.0\n")
    git(ws.root, "add", "--", ws.rel(ws.inbox_file))
    git(ws.root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "MP")
    ws.inbox_file.write_text("# MP-1.1 a newer one, written locally\n")
    assert ws.rel(ws.inbox_file) not in select(ws.root, changes(s, ws.root), None)[0]
    ws.inbox_file.unlink()
    assert ws.rel(ws.inbox_file) in select(ws.root, changes(s, ws.root), None)[0]


def test_fingerprints(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    assert fingerprint(f) == fingerprint(f) != fingerprint(tmp_path / "gone") == "deleted"
    os.symlink("f", tmp_path / "link")
    assert fingerprint(tmp_path / "link") == "link:f"
    d = tmp_path / "d"
    d.mkdir()
    first = fingerprint(d)
    later(tmp_path)
    (d / "new").write_text("y")
    assert fingerprint(d) != first and attribution.ctime_ns(d) >= attribution.ctime_ns(d / "new")
