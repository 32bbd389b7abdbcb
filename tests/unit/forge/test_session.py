"""A pull request's session as data (mp_engine/forge/session.py): reducers keyed by what
happened, replayed after a crash to the same state."""

from __future__ import annotations

from mp_engine.forge.session import Happened, PullRequestSession, apply, replay, result

START = PullRequestSession("app", "mp/MP-2.1", "main")
RECORDS = [
    (Happened.PUSHED, {"sha": "a1", "at": "2026-11-28T12:00:00Z"}),
    (Happened.OPENED, {"number": 7, "url": "https://github.com/me/app/pull/7"}),
    (Happened.CI, {"sha": "a1", "state": "failed", "checks": {"test": "failure"}}),
    (Happened.FIXING, {}),
    (Happened.PUSHED, {"sha": "b2", "at": "2026-11-28T12:10:00Z"}),
    (Happened.CI, {"sha": "b2", "state": "passed", "checks": {"test": "success"}}),
    (Happened.REVIEWING, {"keys": ["review_comment:31"]}),
    (Happened.IGNORED, {"keys": ["comment:32"]}),
    (Happened.PUSHED, {"sha": "c3", "at": "2026-11-28T12:30:00Z"}),
]


def test_the_session_is_the_replay_of_what_happened():
    s = replay(START, RECORDS)
    assert (s.number, s.pushed, s.pushed_at, s.pushes, s.review_rounds) == (7, "c3", "2026-11-28T12:30:00Z", 1, 1)
    assert s.acted == frozenset({"review_comment:31", "comment:32"})
    assert [r.state for r in s.ci] == ["failed", "passed"]


def test_a_restart_at_any_point_replays_to_the_state_it_had():
    for cut in range(len(RECORDS) + 1):
        before = replay(START, RECORDS[:cut])
        assert replay(before, RECORDS[cut:]) == replay(START, RECORDS)


def test_an_ended_session_changes_no_more_and_the_result_says_why():
    s = apply(replay(START, RECORDS), Happened.ENDED, {"why": "merged"})
    assert apply(s, Happened.PUSHED, {"sha": "d4", "at": "x"}) == s
    out = result(s, state="merged")
    assert out["number"] == 7 and out["state"] == "merged" and out["ended"] == "merged"
    assert out["ci_rounds"][0] == {"sha": "a1", "state": "failed", "checks": {"test": "failure"}}
    assert out["review_rounds"] == 1 and out["head_sha"] == "c3"


def test_a_push_is_judged_once_and_the_pull_request_reports_the_push_it_was_updated_for():
    s = replay(START, RECORDS[:2])
    assert s.reported is None and not s.judged  # opened before the sha was recorded with it
    s = apply(s, Happened.UPDATED, {"number": 7, "url": "https://github.com/me/app/pull/7", "sha": "a1"})
    assert s.reported == "a1" and s.number == 7
    s = apply(s, Happened.CI, {"sha": "a1", "state": "passed"})
    assert s.judged
    s = apply(s, Happened.PUSHED, {"sha": "b2", "at": "2026-11-28T12:10:00Z"})
    assert not s.judged and s.reported == "a1"  # a new push: its own verdict, its own update
