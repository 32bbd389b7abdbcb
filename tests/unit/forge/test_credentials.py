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


@pytest.mark.parametrize(
    "url", ["git@github.com:me/app.git", "ssh://git@github.com/me/app", "http://git.example.com/a"]
)
def test_no_token_goes_to_ssh_or_over_clear_text_off_loopback(url):
    assert git_auth(url, Token("github_pat_secret", "APP_PAT")).args == ()


def test_a_whole_round_leaves_the_token_in_no_log_line_no_file_no_error_and_no_url(
    tmp_path, double, token, caplog, monkeypatch
):
    """A pull request's first round, as the agent run will drive it: fetch, worktree, push
    over a real git remote behind the token, open the pull request, poll CI, read a job's
    log, comment on the issue, meet a rate limit. Every logger at DEBUG (httpx, githubkit,
    hishel, werkzeug), every file under the test's directory, every error's text."""
    import logging

    from mp_engine.core.errors import ForgeRateLimited
    from mp_engine.forge import ci, landing
    from mp_engine.forge.repository import open_repository
    from tests.forge.githttp import GitHttp
    from tests.gitutil import git

    caplog.set_level(logging.DEBUG)
    (tmp_path / "served").mkdir()
    served = GitHttp(tmp_path / "served", token)
    try:
        served.bare("me/app")
        repo = RepoConfig(url=f"{served.url}/me/app.git", token_env="APP_PAT", api_url=double.url, forge="github")
        repository = open_repository(tmp_path / "ws" / "repos", "app", repo, {"APP_PAT": token})
        repository.forge._api._sleep = lambda s: None
        mirror, forge = repository.mirror, repository.forge
        mirror.fetch()
        work = mirror.worktree("run-1", "mp/MP-2.1", mirror.start_point("mp/MP-2.1", "main"))
        (work / "hello.txt").write_text("hello\n")
        git(work, "add", "hello.txt")
        git(work, "commit", "-q", "-m", "MP-2.1 MT-001: greet")
        sha = mirror.push(work, "mp/MP-2.1", None)
        issue = double.repo("me/app").add_issue("Greet").number
        report = landing.PullRequestReport("MP-2.1", "Greet", "run-1", "EXACT", issue=issue)
        pr = landing.open_or_update(forge, head="mp/MP-2.1", base="main", report=report, redact=lambda t: t)
        run = double.repo("me/app").add_check(sha, "test", conclusion="failure")
        double.logs[run.id] = "FAILED test_hello\n"
        verdict = ci.judge(forge.ci(sha), 5, timeout=60)
        assert "FAILED test_hello" in ci.failure_text(forge, verdict)
        landing.comment_once(forge, issue, "MP-2.1:issue", landing.issue_comment(pr, "MP-2.1"), redact=lambda t: t)
        double.exhaust_rate_limit(60)
        with pytest.raises(ForgeRateLimited) as limited:
            forge.ci(sha)
    finally:
        served.close()
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert "HTTP Request: POST" in caplog.text  # httpx's own lines were captured
    for form in (token, basic):
        assert form not in caplog.text
        assert form not in str(limited.value) and form not in repr(limited.value)
        assert not any(form in c.query or form in c.path for c in double.calls)
        for path in tmp_path.rglob("*"):
            if path.is_file() and "served" not in path.parts:
                assert form.encode() not in path.read_bytes(), path
    assert double.log_server.authorization_seen == []
