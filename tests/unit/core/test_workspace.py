"""Workspace creation and confinement of `file` blocks."""

from __future__ import annotations

import json
import os

import pytest

from mp_engine.core.errors import ConfinementError, WorkspaceError
from mp_engine.core.workspace import Workspace, init_workspace


def test_init_creates_the_mp13_layout(tmp_path):
    ws, created = init_workspace(tmp_path / "w")
    assert ws.inbox_dir.is_dir() and ws.system_dir.is_dir() and ws.runs_dir.is_dir()
    assert (ws.inbox_dir / ".gitkeep").exists() and ws.config_file.exists()
    state = json.loads(ws.state_file.read_text())
    assert state["status"] == "OFFLINE" and state["current"] == "IDLE" and state["last_completed"] is None
    assert {"engine_version", "last_updated"} <= state.keys()
    assert "SESSION_STATE.json" in created
    assert ".engine/" in (ws.system_dir / ".gitignore").read_text()


def test_init_is_idempotent_and_never_overwrites(tmp_path):
    ws, _ = init_workspace(tmp_path / "w")
    ws.state_file.write_text('{"status": "ONLINE", "current": "MP-9.9", "last_completed": "MP-9.8"}')
    ws.config_file.write_text("# mine\n")
    _, created = init_workspace(tmp_path / "w")
    assert created == []
    assert json.loads(ws.state_file.read_text())["current"] == "MP-9.9"
    assert ws.config_file.read_text() == "# mine\n"


def test_check_says_how_to_create_a_workspace(tmp_path):
    with pytest.raises(WorkspaceError, match="mp-engine init"):
        Workspace.at(tmp_path).check()


@pytest.mark.parametrize(
    "path, why",
    [
        ("/etc/passwd", "absolute"),
        ("../escape.txt", "climbs out"),
        ("a/../../escape.txt", "climbs out"),
        ("SESSION_STATE.json", "owned by mp-engine"),
        ("SYSTEM/RESULT_last.md", "owned by mp-engine"),
        ("SYSTEM/runs/x", "owned by mp-engine"),
        ("Claude_Inbox/incoming_microproject.txt", "owned by mp-engine"),
        (".git/config", "owned by mp-engine"),
        ("mp-engine.toml", "owned by mp-engine"),
        ("", "empty"),
        (".", "root itself"),
    ],
)
def test_confine_refuses(ws, path, why):
    with pytest.raises(ConfinementError, match=why):
        ws.confine(path)


def test_write_confined_refuses_every_symlink_in_the_path(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.root / "out").symlink_to(outside)
    with pytest.raises(ConfinementError, match="symlink"):
        ws.write_confined("out/x.txt", b"x")
    assert not (outside / "x.txt").exists()
    (ws.root / "f.txt").symlink_to(ws.root / "real.txt")
    with pytest.raises(ConfinementError, match="is a symlink"):
        ws.write_confined("f.txt", b"x")
    assert not (ws.root / "real.txt").exists()


@pytest.mark.parametrize(
    ("link", "to", "path", "victim"),
    [
        ("here", ".", "here/mp-engine.toml", "mp-engine.toml"),  # issue #20: the config overwritten
        ("here", ".", "here/SESSION_STATE.json", "SESSION_STATE.json"),  # the state replaced
        ("g", ".git", "g/hooks/post-commit", ".git/hooks/post-commit"),  # a git hook planted
        ("s", "SYSTEM", "s/RESULT_last.md", "SYSTEM/RESULT_last.md"),
        ("i", "Claude_Inbox", "i/incoming_microproject.txt", "Claude_Inbox/incoming_microproject.txt"),
    ],
)
def test_an_inner_symlink_cannot_reach_the_engine_s_files(ws, link, to, path, victim):
    (ws.root / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    os.symlink(to, ws.root / link)
    before = (ws.root / victim).read_bytes() if (ws.root / victim).exists() else None
    with pytest.raises(ConfinementError, match="symlink"):
        ws.write_confined(path, b"#!/bin/sh\necho owned\n")
    after = (ws.root / victim).read_bytes() if (ws.root / victim).exists() else None
    assert after == before


def test_a_symlink_swapped_in_after_the_check_is_not_followed(ws, tmp_path, monkeypatch):
    """The race: the directory is real when checked, a link when written. The walk opens
    each component with O_NOFOLLOW relative to the one before, so there is no window."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.root / "d").mkdir()
    real_open = os.open

    def swapping_open(path, flags, *args, **kwargs):
        if path == "d" and kwargs.get("dir_fd") is not None and not (ws.root / "d").is_symlink():
            os.rmdir(ws.root / "d")
            os.symlink(outside, ws.root / "d")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping_open)
    with pytest.raises(ConfinementError, match="symlink"):
        ws.write_confined("d/x.txt", b"x")
    assert not (outside / "x.txt").exists()


def test_write_confined_makes_directories_and_replaces_files(ws):
    assert ws.write_confined("src/./pkg/app.py", b"one") == ws.root / "src" / "pkg" / "app.py"
    assert ws.write_confined("src/pkg/app.py", b"two") == ws.root / "src" / "pkg" / "app.py"
    assert (ws.root / "src/pkg/app.py").read_bytes() == b"two"
    assert ws.write_confined("a/../b.txt", b"b") == ws.root / "b.txt"
    assert ws.write_confined("SYSTEM/notes.md", b"n") == ws.root / "SYSTEM" / "notes.md"
    assert not [p for p in (ws.root / "src/pkg").iterdir() if p.name != "app.py"]  # no temp file left
    (ws.root / "plain").write_text("x")
    with pytest.raises(ConfinementError, match="not a directory"):
        ws.write_confined("plain/x.txt", b"x")


def test_a_pre_0_2_event_log_is_moved_off_the_committed_tree(ws):
    from mp_engine.core.workspace import move_legacy_event_log

    seen: list[tuple] = []
    ws.legacy_events_file.write_text('{"event": "old"}\n')
    move_legacy_event_log(ws, lambda event, **f: seen.append((event, f)))
    assert not ws.legacy_events_file.exists() and ws.events_file.read_text().startswith('{"event": "old"}')
    assert seen[0][0] == "event_log_moved"


def test_old_lines_go_before_lines_a_cli_wrote_first(ws):
    from mp_engine.core.workspace import move_legacy_event_log

    ws.events_file.parent.mkdir(parents=True, exist_ok=True)
    ws.events_file.write_text('{"event": "new"}\n')
    ws.legacy_events_file.write_text('{"event": "old"}\n')
    move_legacy_event_log(ws, lambda *a, **k: None)
    assert ws.events_file.read_text() == '{"event": "old"}\n{"event": "new"}\n'
    move_legacy_event_log(ws, lambda *a, **k: pytest.fail("nothing to move the second time"))
