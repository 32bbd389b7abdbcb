"""A repository's token (mp_engine/forge/credentials.py): from the held secrets, shown
nowhere, given to git as a header scoped to the repository's URL. That git really sends it
that way, and only that way, is tests/unit/forge/test_mirror.py's real remote."""

from __future__ import annotations

import base64

import pytest

from mp_engine.config.repos import RepoConfig
from mp_engine.core.errors import ConfigError
from mp_engine.forge.credentials import AUTH_VARIABLE, Token, git_auth, token_for

REPO = RepoConfig(url="https://github.com/me/app.git", token_env="APP_PAT")


def test_the_token_comes_from_the_variable_token_env_names():
    token = token_for("app", REPO, {"APP_PAT": "github_pat_abc123456789"})
    assert token.reveal() == "github_pat_abc123456789" and token.source == "APP_PAT"
    assert token_for("lab", RepoConfig(url="git@example.com:me/lab.git", land="branch"), {}) is None


def test_a_variable_that_is_not_set_stops_the_start_with_the_fix():
    with pytest.raises(ConfigError, match=r"APP_PAT is not set in the engine's environment. Fix: export APP_PAT"):
        token_for("app", REPO, {})


def test_a_token_shows_only_where_it_came_from():
    token = Token("github_pat_secret", "APP_PAT")
    assert repr(token) == str(token) == f"{token!s}" == "<token from $APP_PAT>"
    with pytest.raises(TypeError):
        __import__("pickle").dumps(token)


def test_git_gets_a_header_scoped_to_the_url_and_named_by_a_variable():
    auth = git_auth("https://someone@github.com/me/app.git/", Token("github_pat_secret", "APP_PAT"))
    assert auth.args == (
        "-c",
        "credential.helper=",
        f"--config-env=http.https://github.com/me/app.git.extraHeader={AUTH_VARIABLE}",
    )
    basic = base64.b64encode(b"x-access-token:github_pat_secret").decode()
    assert auth.env[AUTH_VARIABLE] == f"Authorization: Basic {basic}"
    assert "secret" not in repr(auth) and basic not in repr(auth)


@pytest.mark.parametrize("url", ["git@github.com:me/app.git", "ssh://git@github.com/me/app", "http://git.example.com/a"])
def test_no_token_goes_to_ssh_or_over_clear_text_off_loopback(url):
    assert git_auth(url, Token("github_pat_secret", "APP_PAT")).args == ()
