"""The forge on GitHub (mp_engine/forge/github.py) against the GitHub double, which checks
every request against GitHub's OpenAPI description (tests/forge/)."""

from __future__ import annotations

import time

import pytest

from mp_engine.core.errors import ForgeAuthError, ForgeError, ForgeNotFound, ForgeRateLimited, ForgeUnavailable
from mp_engine.forge.base import CheckState
from mp_engine.forge.credentials import Token
from mp_engine.forge.github import GitHubForge
from tests.forge.github_double import GitHubDouble
from tests.unit.forge.conftest import SLUG

SHA = "a" * 40


def test_a_pull_request_is_found_by_its_head_opened_updated_and_read(forge, double):
    assert forge.find_pull_request("mp/MP-1.2") is None
    pr = forge.open_pull_request(head="mp/MP-1.2", base="main", title="MP-1.2 Greet", body="the result")
    assert (pr.number, pr.head, pr.base, pr.state, pr.title) == (1, "mp/MP-1.2", "main", "open", "MP-1.2 Greet")
    assert pr.url == "https://github.com/me/app/pull/1"
    assert forge.find_pull_request("mp/MP-1.2") == pr
    assert forge.update_pull_request(1, body="the new result").body == "the new result"
    assert forge.pull_request(1).body == "the new result"
    head = [c for c in double.calls if c.method == "GET" and c.path.endswith("/pulls")][0]
    assert "head=me%3Amp%2FMP-1.2" in head.query and "state=all" in head.query


def test_a_second_pull_request_from_one_head_is_refused_by_the_forge(forge):
    forge.open_pull_request(head="mp/MP-1.2", base="main", title="t", body="b")
    with pytest.raises(ForgeError, match="422: Validation Failed"):
        forge.open_pull_request(head="mp/MP-1.2", base="main", title="t", body="b")


def test_a_merged_pull_request_reads_as_merged_and_a_closed_one_is_found_too(forge, double):
    pr = forge.open_pull_request(head="mp/MP-1.2", base="main", title="t", body="b")
    assert forge.merge_pull_request(pr.number, pr.head_sha) is True
    assert forge.pull_request(pr.number).state == "merged"
    assert forge.find_pull_request("mp/MP-1.2").state == "merged"
    assert forge.merge_pull_request(pr.number, pr.head_sha) is False  # GitHub: 405, not mergeable


def test_comments_on_an_issue_since_a_point_and_a_new_one(forge, double):
    repo = double.repo(SLUG)
    issue = repo.add_issue("Greet people")
    repo.comment(issue.number, "alice", "please greet")
    mine = forge.comment(issue.number, "on it <!-- mp-engine -->")
    seen = forge.comments(issue.number)
    assert [(c.author, c.body) for c in seen] == [("alice", "please greet"), ("mp-bot", "on it <!-- mp-engine -->")]
    assert mine.id == seen[-1].id and mine.kind == "comment"
    assert forge.comments(issue.number, since="2999-01-01T00:00:00Z") == []


def test_review_feedback_is_reviews_and_line_comments_oldest_first(forge, double):
    pr = forge.open_pull_request(head="mp/MP-1.2", base="main", title="t", body="b")
    repo = double.repo(SLUG)
    repo.review_comment(pr.number, "alice", "rename this")
    repo.review(pr.number, "bob", "CHANGES_REQUESTED", "see the line comment")
    feedback = forge.review_feedback(pr.number)
    assert [(c.kind, c.author) for c in feedback] == [("review_comment", "alice"), ("review", "bob")]
    assert feedback[0].path == "README.md" and feedback[1].review_state == "CHANGES_REQUESTED"
    assert len({c.key for c in feedback}) == 2


def test_ci_is_check_runs_and_statuses_and_an_unchanged_poll_costs_no_rate_limit(forge, double):
    repo = double.repo(SLUG)
    repo.add_check(SHA, "test", conclusion="failure", summary="2 failed")
    repo.add_check(SHA, "lint", status="in_progress")
    repo.add_check(SHA, "docs", conclusion="skipped", app="netlify")
    repo.add_status(SHA, "ci/jenkins", "error", "build broke")
    report = forge.ci(SHA)
    states = {c.name: (c.state, c.conclusion) for c in report.checks}
    assert states == {
        "test": (CheckState.FAILED, "failure"),
        "lint": (CheckState.PENDING, "in_progress"),
        "docs": (CheckState.PASSED, "skipped"),
        "ci/jenkins": (CheckState.FAILED, "error"),
    }
    test = next(c for c in report.checks if c.name == "test")
    assert test.job_id is not None and "2 failed" in test.summary
    assert next(c for c in report.checks if c.name == "docs").job_id is None  # not GitHub Actions: no job log
    assert report.changed and [c.name for c in report.failing()] == ["ci/jenkins", "test"]
    spent = double.counted()
    again = forge.ci(SHA)
    assert again.checks == report.checks and not again.changed
    assert double.counted() == spent, "a conditional poll that GitHub answers 304 costs no rate limit"
    assert [c.status for c in double.calls[-2:]] == [304, 304]
    repo.add_status(SHA, "ci/jenkins", "success")
    assert forge.ci(SHA).changed


def test_a_job_log_is_read_behind_the_redirect_without_the_token_reaching_its_host(forge, double):
    run = double.repo(SLUG).add_check(SHA, "test", conclusion="failure")
    double.logs[run.id] = "setup\n" * 1000 + "FAILED tests/test_x.py::test_y - assert 1 == 2\n"
    log = forge.job_log(run.id, max_bytes=200)
    assert log.endswith("FAILED tests/test_x.py::test_y - assert 1 == 2\n") and len(log) == 200
    assert double.log_server.authorization_seen == []


def test_a_collaborator_s_permission_and_a_stranger_s(forge, double):
    double.repo(SLUG).permissions["alice"] = "write"
    assert forge.permission("alice") == "write"
    assert forge.permission("mallory") == "none"


def test_labelled_issues_and_a_label_swap_that_only_one_engine_wins(forge, double):
    repo = double.repo(SLUG)
    issue = repo.add_issue("Add a greeting", "Say hello.", ("mp-engine",))
    repo.add_issue("Unrelated")
    found = forge.labelled_issues("mp-engine")
    assert [(i.number, i.title, i.labels) for i in found] == [(issue.number, "Add a greeting", ("mp-engine",))]
    forge.add_label(issue.number, "mp-engine: taken")
    assert forge.remove_label(issue.number, "mp-engine") is True
    assert forge.remove_label(issue.number, "mp-engine") is False  # the second engine: someone took it
    assert repo.issues[issue.number].labels == ["mp-engine: taken"]


def test_a_5xx_is_retried_with_backoff_and_then_said_clearly(double, token):
    naps = []
    forge = GitHubForge(SLUG, double.url, Token(token, "APP_PAT"), sleep=naps.append)
    double.inject(502, times=2, path="/pulls")
    assert forge.find_pull_request("mp/x") is None
    assert len(naps) == 2
    double.inject(503, times=3, path="/pulls")
    with pytest.raises(ForgeUnavailable, match="did not answer find the pull request .* 503.*retries later"):
        forge.find_pull_request("mp/x")


def test_a_call_that_must_not_run_twice_is_not_retried(forge, double):
    double.inject(502, times=1, path="/pulls")
    with pytest.raises(ForgeUnavailable):
        forge.open_pull_request(head="mp/x", base="main", title="t", body="b")
    assert [c.status for c in double.calls if c.method == "POST"] == [502]


def test_a_forge_that_is_not_there_is_unavailable(token):
    forge = GitHubForge(SLUG, "http://127.0.0.1:9", Token(token, "APP_PAT"), sleep=lambda s: None, attempts=2)
    with pytest.raises(ForgeUnavailable, match="ConnectError"):
        forge.pull_request(1)


def test_a_refused_token_and_a_missing_permission_say_what_to_give(forge, double, token):
    wrong = GitHubForge(SLUG, double.url, Token("github_pat_wrong", "APP_PAT"), sleep=lambda s: None)
    with pytest.raises(ForgeAuthError, match="refused the token .*401: Bad credentials"):
        wrong.pull_request(1)
    headers = {"X-Accepted-GitHub-Permissions": "pull_requests=write"}
    double.inject(403, path="/pulls", headers=headers, message="Resource not accessible by personal access token")
    with pytest.raises(ForgeAuthError, match="pull_requests=write on this repository") as info:
        forge.open_pull_request(head="mp/x", base="main", title="t", body="b")
    assert info.value.needs == "pull_requests=write"
    double.inject(403, path="/check-runs", message="Resource not accessible by personal access token")
    with pytest.raises(ForgeAuthError, match="checks=read"):
        forge.ci(SHA)


def test_nothing_there_is_not_found(forge):
    with pytest.raises(ForgeNotFound, match="404"):
        forge.pull_request(99)


def test_the_primary_rate_limit_says_until_when(forge, double):
    double.exhaust_rate_limit(reset_in=120)
    with pytest.raises(ForgeRateLimited, match="rate limit is reached") as info:
        forge.pull_request(1)
    assert not info.value.secondary and 100 < info.value.until - time.time() <= 121
    assert forge.rate().remaining == 0


def test_the_secondary_rate_limit_waits_as_retry_after_says(forge, double):
    message = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    double.inject(403, path="/pulls", headers={"Retry-After": "30"}, message=message)
    with pytest.raises(ForgeRateLimited, match="secondary rate limit") as info:
        forge.find_pull_request("mp/x")
    assert info.value.secondary and 25 < info.value.until - time.time() <= 31


def test_github_enterprise_is_the_same_api_under_its_own_root(description, token):
    double = GitHubDouble(token, prefix="/api/v3")
    try:
        double.repo(SLUG)
        forge = GitHubForge(SLUG, double.url, Token(token, "APP_PAT"))
        assert double.url.endswith("/api/v3")
        assert forge.open_pull_request(head="mp/x", base="main", title="t", body="b").number == 1
        assert double.violations == []
    finally:
        double.close()


def test_the_rate_limit_is_known_for_status(forge, double):
    forge.find_pull_request("mp/x")
    assert forge.rate().limit == 5000 and forge.rate().remaining == double.remaining


def test_the_token_shows_in_no_repr_and_goes_as_a_bearer_header(forge, double, token):
    assert token not in repr(forge) and token not in repr(forge._api.gh.auth) and token not in repr(vars(forge))
    assert repr(Token(token, "APP_PAT")) == "<token from $APP_PAT>" and token not in str(Token(token, "APP_PAT"))
    with pytest.raises(TypeError):
        __import__("pickle").dumps(Token(token, "APP_PAT"))
