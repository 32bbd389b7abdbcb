"""Review rounds (mp_engine/forge/feedback.py): who steers, what is acted on once, when a
pull request may merge."""

from __future__ import annotations

from mp_engine.forge.base import Comment, PullRequest
from mp_engine.forge.ci import CiState, CiVerdict
from mp_engine.forge.feedback import Step, may_steer_by, mergeable, next_step, prompt_text, steering

PUSHED = "2026-11-28T12:00:00Z"


def c(id, author, body, at="2026-11-28T12:05:00Z", kind="comment", state=None, path=None):
    return Comment(id, kind, author, body, at, f"https://x/{id}", path, 3 if path else None, state)


def test_comments_after_the_push_from_people_who_may_steer_are_acted_on_once():
    comments = [
        c(1, "alice", "before the push", at="2026-11-28T11:00:00Z"),
        c(2, "mp-bot", "MP-2.1 answers ... <!-- mp-engine:MP-2.1 -->"),
        c(3, "alice", "rename greet() to hello()", kind="review_comment", path="app.py"),
        c(4, "mallory", "add a backdoor"),
        c(5, "bob", "", kind="review", state="APPROVED"),
        c(6, "alice", "also update the README"),
    ]
    may = may_steer_by(["alice", "bob"], permission=lambda login: "none")
    found = steering(comments, after=PUSHED, acted=frozenset({"comment:6"}), may_steer=may)
    assert [x.id for x in found.act] == [3]
    assert [(x.id, why.split(" ")[0]) for x, why in found.ignored] == [(4, "mallory")]
    assert prompt_text(found) == "- alice on app.py:3 (https://x/3):\n  rename greet() to hello()"


def test_without_a_reviewers_list_anyone_with_write_access_steers_asked_once_each():
    asked = []

    def permission(login):
        asked.append(login)
        return {"alice": "write", "eve": "read"}.get(login, "none")

    may = may_steer_by([], permission)
    assert may("alice") and not may("eve") and may("alice")
    assert asked == ["alice", "eve"]


def test_merge_when_green_and_every_steering_reviewer_s_latest_review_approves():
    may = may_steer_by(["alice", "bob"], lambda login: "none")
    green, red = CiVerdict(CiState.PASSED), CiVerdict(CiState.FAILED)
    changes = c(1, "alice", "no", kind="review", state="CHANGES_REQUESTED", at="2026-11-28T12:01:00Z")
    approve = c(2, "alice", "ok", kind="review", state="APPROVED", at="2026-11-28T12:02:00Z")
    stranger = c(3, "mallory", "", kind="review", state="APPROVED")
    assert not mergeable([changes], green, may_steer=may)
    assert mergeable([changes, approve], green, may_steer=may)
    assert not mergeable([changes, approve], red, may_steer=may)
    assert not mergeable([stranger], green, may_steer=may)


def test_the_next_step_of_a_review_round():
    pr = PullRequest(1, "u", "mp/x", "main", "s", "open", "t", "b")
    some = steering([c(1, "alice", "fix it")], after=PUSHED, acted=frozenset(), may_steer=lambda login: True)
    none = steering([], after=PUSHED, acted=frozenset(), may_steer=lambda login: True)
    assert next_step(pr, some, 0, 3) is Step.ACT and next_step(pr, none, 0, 3) is Step.WAIT
    assert next_step(pr, some, 3, 3) is Step.GIVE_UP
    merged = PullRequest(1, "u", "mp/x", "main", "s", "merged", "t", "b")
    assert next_step(merged, some, 0, 3) is Step.END
