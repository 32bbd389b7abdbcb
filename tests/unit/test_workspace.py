"""Workspace creation and confinement of `file` blocks."""

from __future__ import annotations

import json
import os

import pytest

from mp_engine.errors import ConfinementError, WorkspaceError
from mp_engine.workspace import Workspace, init_workspace


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


def test_confine_refuses_symlinks_out_and_symlink_targets(ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws.root / "out").symlink_to(outside)
    with pytest.raises(ConfinementError, match="points outside"):
        ws.confine("out/x.txt")
    (ws.root / "f.txt").symlink_to(ws.root / "real.txt")
    with pytest.raises(ConfinementError, match="is a symlink"):
        ws.confine("f.txt")


def test_confine_allows_normal_and_inner_symlinked_paths(ws):
    assert ws.confine("src/./app.py") == ws.root / "src" / "app.py"
    assert ws.confine("a/../b.txt") == ws.root / "b.txt"
    (ws.root / "real").mkdir()
    os.symlink("real", ws.root / "alias")
    assert ws.confine("alias/x.txt") == ws.root / "alias" / "x.txt"
    assert ws.confine("SYSTEM/notes.md") == ws.root / "SYSTEM" / "notes.md"


def test_a_pre_0_2_event_log_is_moved_off_the_committed_tree(ws):
    from mp_engine.workspace import move_legacy_event_log

    seen: list[tuple] = []
    ws.legacy_events_file.write_text('{"event": "old"}\n')
    move_legacy_event_log(ws, lambda event, **f: seen.append((event, f)))
    assert not ws.legacy_events_file.exists() and ws.events_file.read_text().startswith('{"event": "old"}')
    assert seen[0][0] == "event_log_moved"


def test_old_lines_go_before_lines_a_cli_wrote_first(ws):
    from mp_engine.workspace import move_legacy_event_log

    ws.events_file.parent.mkdir(parents=True, exist_ok=True)
    ws.events_file.write_text('{"event": "new"}\n')
    ws.legacy_events_file.write_text('{"event": "old"}\n')
    move_legacy_event_log(ws, lambda *a, **k: None)
    assert ws.events_file.read_text() == '{"event": "old"}\n{"event": "new"}\n'
    move_legacy_event_log(ws, lambda *a, **k: pytest.fail("nothing to move the second time"))
