"""`init --remote`: clone or attach, and `[git]` switched on without losing the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from mp_engine.config.load import load_config
from mp_engine.core.errors import SyncError
from mp_engine.sync.setup import connect_workspace, enable_git_config, local_path_absolute, setup_remote
from tests.gitutil import git, make_remote, remote_log


def test_setup_clones_an_empty_remote_commits_and_pushes_the_layout(tmp_path):
    bare = make_remote(tmp_path)
    done = setup_remote(tmp_path / "ws", f"file://{bare}", "main")
    assert "committed the workspace layout" in done and any(d.startswith("pushed main") for d in done)
    assert remote_log(bare) == ["mp-engine: workspace layout"]
    cfg = load_config(tmp_path / "ws").git
    assert (cfg.enabled, cfg.remote, cfg.branch) == (True, "origin", "main")


def test_setup_is_idempotent(tmp_path):
    bare = make_remote(tmp_path)
    setup_remote(tmp_path / "ws", f"file://{bare}", "main")
    again = setup_remote(tmp_path / "ws", f"file://{bare}", "main")
    assert "committed the workspace layout" not in again and remote_log(bare) == ["mp-engine: workspace layout"]


def test_an_existing_directory_is_attached_and_pushed_later_when_the_remote_is_not_there(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.md").write_text("the operator's\n")
    done = setup_remote(tmp_path / "ws", str(tmp_path / "not-yet.git"), "main")
    assert "created a git repository" in done and any(d.startswith("not pushed yet") for d in done)
    assert (tmp_path / "ws" / "notes.md").read_text() == "the operator's\n"


def test_cloning_a_missing_remote_fails_with_gits_words(tmp_path):
    with pytest.raises(SyncError, match="does not exist"):
        setup_remote(tmp_path / "ws", str(tmp_path / "not-yet.git"), "main")


def test_attaching_refuses_an_origin_that_points_elsewhere(tmp_path):
    d = tmp_path / "existing"
    d.mkdir()
    git(d, "init", "-q", "-b", "main")
    git(d, "remote", "add", "origin", "https://example.invalid/other.git")
    with pytest.raises(SyncError, match="remote set-url origin"):
        connect_workspace(d, "https://example.invalid/mine.git", "main")


def test_enable_git_config_edits_only_the_git_section(tmp_path):
    f = tmp_path / "mp-engine.toml"
    f.write_text(
        "[engine]\npoll_interval = 3.0  # mine\n\n[git]\nenabled = false\npoll_interval = 7.0\n\n[agent]\nmax_iterations = 4\n"
    )
    enable_git_config(f, 'with "quote"', "dev")
    text = f.read_text()
    assert "poll_interval = 3.0  # mine" in text and "max_iterations = 4" in text and "poll_interval = 7.0" in text
    assert 'remote = "with \\"quote\\""' in text and 'branch = "dev"' in text and "enabled = true" in text
    enable_git_config(tmp_path / "new.toml", "origin", "main")
    assert (tmp_path / "new.toml").read_text().startswith("[git]\nenabled = true\n")


def test_a_relative_directory_and_remote_path_are_taken_from_where_the_user_is(tmp_path, monkeypatch):
    # issue #44: git clone ran with cwd=DIR, so `init --remote URL ws` cloned into ws/ws.
    bare = make_remote(tmp_path)
    monkeypatch.chdir(tmp_path)
    setup_remote(Path("first"), f"file://{bare}", "main")
    assert (tmp_path / "first" / ".git").is_dir() and not (tmp_path / "first" / "first").exists()
    done = setup_remote(Path("ws"), bare.name, "main")
    assert f"cloned {bare}" in done and not (tmp_path / "ws" / "ws").exists()
    assert remote_log(bare) == ["mp-engine: workspace layout"]
    assert git(tmp_path / "ws", "remote", "get-url", "origin") == str(bare)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.md").write_text("kept\n")
    setup_remote(Path("other"), bare.name, "main")  # attached: origin must work from inside it
    assert git(tmp_path / "other", "remote", "get-url", "origin") == str(bare)


@pytest.mark.parametrize(
    "url", ["file:///srv/ch.git", "https://example.com/ch.git", "git@github.com:me/ch.git", "/srv/ch.git"]
)
def test_urls_and_absolute_paths_are_left_as_they_are(url):
    assert local_path_absolute(url) == url
