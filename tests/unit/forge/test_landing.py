"""Landing as a pull request (mp_engine/forge/landing.py): one per head, opened or updated,
one comment on the issue, each safe to repeat after kill -9; on the memory forge and on
GitHub's client against the double."""

from __future__ import annotations

import pytest

from mp_engine.core.errors import ForgeUnavailable
from mp_engine.forge.landing import (
    PullRequestReport,
    Task,
    comment_once,
    issue_comment,
    open_or_update,
    pull_request_body,
)
from tests.unit.forge.conftest import SLUG

REPORT = PullRequestReport(
    "MP-2.1",
    "Add a greeting",
    "20261128T120000Z-MP-2.1",
    "EXACT",
    tasks=(Task("MT-001", "greet | politely", "0123456789abcdef"),),
    checks=(("pytest -q", True), ("ruff", False)),
    tokens=12345,
    cost_usd=0.42,
    issue=7,
)


def same(text: str) -> str:
    return text


def test_the_body_carries_the_result_the_issue_and_the_engine_s_marker():
    body = pull_request_body(REPORT)
    assert body.startswith("**MP-2.1** Add a greeting\n\nFixes #7\n")
    assert "Certificate: **EXACT** · run `20261128T120000Z-MP-2.1` · 12,345 tokens, $0.42" in body
    assert "| MT-001 | greet \\| politely | 0123456789ab |" in body
    assert "- ✅ `pytest -q`" in body and "- ❌ `ruff`" in body
    assert body.rstrip().endswith("<!-- mp-engine:MP-2.1 -->")


def test_one_pull_request_per_head_opened_then_updated(any_forge):
    pr = open_or_update(any_forge, head="mp/MP-2.1", base="main", report=REPORT, redact=same)
    assert pr.state == "open" and pr.title == "MP-2.1: Add a greeting" and "Fixes #7" in pr.body
    again = open_or_update(any_forge, head="mp/MP-2.1", base="main", report=REPORT, redact=same)
    assert again.number == pr.number  # a restart after kill -9 finds it by its head
    later = PullRequestReport(**{**REPORT.__dict__, "certificate": "UNVERIFIED"})
    assert "UNVERIFIED" in open_or_update(any_forge, head="mp/MP-2.1", base="main", report=later, redact=same).body
    assert any_forge.find_pull_request("mp/MP-2.1").number == pr.number


def test_what_leaves_the_machine_is_redacted(any_forge):
    secret = PullRequestReport(**{**REPORT.__dict__, "notes": ("the key was hunter2hunter2",)})
    pr = open_or_update(
        any_forge,
        head="mp/MP-2.1",
        base="main",
        report=secret,
        redact=lambda t: t.replace("hunter2hunter2", "[REDACTED]"),
    )
    assert "hunter2" not in pr.body and "[REDACTED]" in pr.body


def test_a_pull_request_opened_whose_answer_was_lost_is_found_not_opened_twice(forge, double):
    double.inject(502, path="/pulls", method="POST", after=True)
    pr = open_or_update(forge, head="mp/MP-2.1", base="main", report=REPORT, redact=same)
    assert len(double.repo(SLUG).pulls) == 1 and pr.number == 1


def test_an_opening_that_did_not_happen_is_said_so(forge, double):
    double.inject(502, path="/pulls", method="POST", message="bad gateway")
    with pytest.raises(ForgeUnavailable):
        open_or_update(forge, head="mp/MP-2.1", base="main", report=REPORT, redact=same)
    assert double.repo(SLUG).pulls == {}


def test_a_merged_pull_request_s_branch_gets_a_new_one(any_forge):
    pr = open_or_update(any_forge, head="mp/MP-2.1", base="main", report=REPORT, redact=same)
    assert any_forge.merge_pull_request(pr.number, any_forge.pull_request(pr.number).head_sha)
    again = open_or_update(any_forge, head="mp/MP-2.1", base="main", report=REPORT, redact=same)
    assert again.number != pr.number and again.state == "open"


def test_the_issue_gets_one_comment_however_often_it_is_asked(any_forge, new_issue):
    issue = new_issue("Greet")
    pr = open_or_update(any_forge, head="mp/MP-2.1", base="main", report=REPORT, redact=same)
    first = comment_once(any_forge, issue, "MP-2.1:issue", issue_comment(pr, "MP-2.1"), redact=same)
    second = comment_once(any_forge, issue, "MP-2.1:issue", issue_comment(pr, "MP-2.1"), redact=same)
    assert first.id == second.id and len(any_forge.comments(issue)) == 1
    assert f"pull request #{pr.number}" in first.body


def test_a_comment_whose_answer_was_lost_is_not_written_twice(forge, double):
    issue = double.repo(SLUG).add_issue("Greet").number
    double.inject(502, path="/comments", method="POST", after=True)
    comment_once(forge, issue, "k", "on it", redact=same)
    assert len(double.repo(SLUG).comments) == 1
