"""The configured repositories as a run uses them (mp_engine/forge/repository.py)."""

from __future__ import annotations

import sys

import pytest

from mp_engine.config.load import Config
from mp_engine.config.repos import RepoConfig
from mp_engine.core.errors import ConfigError
from mp_engine.forge.github import GitHubForge
from mp_engine.forge.repository import open_repositories

CONFIG = Config(
    repos={
        "app": RepoConfig(url="https://github.com/me/app.git", token_env="APP_PAT"),
        "lab": RepoConfig(url="git@git.example.com:me/lab.git", land="branch"),
    }
)


def test_each_repository_has_its_mirror_and_its_forge(tmp_path):
    repos = open_repositories(tmp_path, CONFIG, {"APP_PAT": "github_pat_xyz"})
    app, lab = repos["app"], repos["lab"]
    assert isinstance(app.forge, GitHubForge) and app.forge.slug == "me/app" and lab.forge is None
    assert app.mirror.home == tmp_path / "repos" / "app" and not app.mirror.home.exists()  # made on first use
    assert app.base(None) == "main" and app.base("release/2.0") == "release/2.0"
    assert app.work_branch("MP-2.1") == "mp/MP-2.1"


def test_a_token_that_is_not_there_stops_the_start(tmp_path):
    with pytest.raises(ConfigError, match="APP_PAT is not set"):
        open_repositories(tmp_path, CONFIG, {})


def test_without_the_github_extra_the_fix_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "githubkit", None)
    with pytest.raises(ConfigError, match=r"Fix: pip install 'mp-engine\[github\]'"):
        open_repositories(tmp_path, CONFIG, {"APP_PAT": "github_pat_xyz"})
