"""`[repos.NAME]` (issue #41): validated as a whole, tokens by reference only."""

from __future__ import annotations

import pytest

from mp_engine.config.load import load_config
from mp_engine.config.repos import RepoConfig, split_url
from mp_engine.core import secretenv
from mp_engine.core.errors import ConfigError
from mp_engine.sync.redact import Redactor

APP = '[repos.app]\nurl = "https://github.com/me/app.git"\ntoken_env = "APP_PAT"\n'


def load(tmp_path, text: str, environ=None):
    (tmp_path / "mp-engine.toml").write_text(text)
    return load_config(tmp_path, environ=environ or {})


def test_a_github_repository_lands_as_a_pull_request_by_default(tmp_path):
    repo = load(tmp_path, APP).repos["app"]
    assert (repo.land, repo.base, repo.forge_kind, repo.slug) == ("pull_request", "main", "github", "me/app")
    assert repo.api_root == "https://api.github.com"
    assert (repo.ci_rounds, repo.review_rounds, repo.merge) == (2, 3, "never")


@pytest.mark.parametrize(
    "url, host, path",
    [
        ("https://github.com/me/app.git", "github.com", "me/app"),
        ("git@github.com:me/app.git", "github.com", "me/app"),
        ("ssh://git@GitHub.com/me/app", "github.com", "me/app"),
        ("https://ghe.example.com/team/app/", "ghe.example.com", "team/app"),
        ("file:///srv/git/app.git", "", "srv/git/app"),
    ],
)
def test_urls_in_every_form_git_takes_name_host_and_owner_repo(url, host, path):
    assert split_url(url) == (host, path)


def test_github_enterprise_is_github_through_api_url(tmp_path):
    text = (
        '[repos.ghe]\nurl = "https://ghe.example.com/team/app.git"\ntoken_env = "GHE_TOKEN"\n'
        'api_url = "https://ghe.example.com/api/v3/"\n'
    )
    repo = load(tmp_path, text).repos["ghe"]
    assert (repo.forge_kind, repo.api_root, repo.slug) == ("github", "https://ghe.example.com/api/v3", "team/app")


@pytest.mark.parametrize(
    "text, says",
    [
        ('[repos.app]\nurl = "https://github.com/me/app.git"\n', "needs a token: set token_env"),
        (
            '[repos.app]\nurl = "https://github.com/me/app.git"\ntoken_env = "ghp_' + "a" * 36 + '"\n',
            "looks like a token itself",
        ),
        ('[repos.app]\nurl = "https://git.example.com/me/app.git"\ntoken_env = "T"\n', "needs a forge"),
        ('[repos.app]\nurl = "https://github.com/me/app.git"\nland = "rebase"\n', "repos.app.land"),
        ('[repos."../x"]\nurl = "git@github.com:me/x.git"\nland = "branch"\n', "a repository's name is"),
        (APP + "ci_rounds = -1\n", "repos.app.ci_rounds"),
    ],
)
def test_what_cannot_work_is_refused_before_start_naming_the_key(tmp_path, text, says):
    with pytest.raises(ConfigError, match="invalid configuration") as info:
        load(tmp_path, text)
    assert says in str(info.value)


def test_an_unknown_key_in_a_repository_lists_the_known_ones(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, APP + "tokenenv = 'X'\n")
    assert "repos.app.tokenenv: unknown key" in str(info.value) and "token_env" in str(info.value)


def test_a_repository_without_a_forge_may_land_by_merge_or_branch(tmp_path):
    repo = load(tmp_path, '[repos.lab]\nurl = "git@git.example.com:me/lab.git"\nland = "branch"\n').repos["lab"]
    assert repo.forge_kind == "none" and repo.token_env == ""


def test_the_token_is_held_out_of_the_environment_and_masked(tmp_path, monkeypatch):
    config = load(tmp_path, APP)  # APP_PAT matches no [secrets] pattern: token_env alone holds it
    assert config.secret_names == ("APP_PAT",)
    monkeypatch.setenv("APP_PAT", "s3cret-value-of-the-token")
    try:
        assert secretenv.hold(config.secret_names, config.secrets.env_patterns) == ["APP_PAT"]
        assert "APP_PAT" not in __import__("os").environ
        redact = Redactor.from_config(config)
        assert redact("pushed with s3cret-value-of-the-token") == "pushed with [REDACTED]"
    finally:
        secretenv.release()


@pytest.mark.parametrize(
    "where",
    [
        "[execution]\nenv_allow = ['APP_PAT']\n",
        "[agent]\n[[agent.levels]]\nname = 'claude'\nargv = ['claude']\nstdin = true\nenv_allow = ['APP_PAT']\n",
    ],
)
def test_no_step_and_no_agent_may_be_given_a_repository_s_token(tmp_path, where):
    with pytest.raises(ConfigError, match="never reaches a step or an agent"):
        load(tmp_path, where + APP)


def test_a_repository_from_the_environment(tmp_path):
    config = load(tmp_path, "", {"MP_ENGINE_REPOS__LAB": '{"url": "git@example.com:me/lab.git", "land": "branch"}'})
    assert config.repos["lab"] == RepoConfig(url="git@example.com:me/lab.git", land="branch")


def test_a_url_with_a_token_in_it_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="url carries a password or token"):
        load(tmp_path, '[repos.app]\nurl = "https://x-access-token:ghp_abc@github.com/me/app.git"\ntoken_env = "T"\n')


def test_issues_as_a_source_answer_with_a_pull_request_and_poll_every_five_minutes(tmp_path):
    repo = load(tmp_path, APP + 'issues_label = "mp-engine"\n').repos["app"]
    assert (repo.issues_poll, repo.taken_label, repo.checks) == (300.0, "mp-engine: taken", ())
    with pytest.raises(ConfigError, match='set land = "pull_request"'):
        load(tmp_path, APP + 'issues_label = "mp-engine"\nland = "branch"\n')
