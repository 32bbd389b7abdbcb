"""One pull request's session, as data: a frozen dataclass and a table of pure reducers
keyed by what happened (`Happened`). The agent run records each happening in its ledger
before it acts on the next one, and replays them after a crash (`replay`): the state after
`kill -9` is the state before it, so no second pull request, no comment acted on twice,
no lost round (issue #41).

`result()` is what RESULT_last.json carries as `pull_request`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any


class Happened(StrEnum):
    PUSHED = "pushed"  # {"sha", "at"}: the work branch is on the remote at `sha`
    OPENED = "opened"  # {"number", "url", "sha"}: the pull request (opened, or found by its head)
    UPDATED = "updated"  # {"number", "url", "sha"}: its title and body brought up to the push `sha`
    CI = "ci"  # {"sha", "state", "checks": {name: conclusion}}: a verdict that ended a wait
    FIXING = "fixing"  # {}: red CI went back to the agent (a CI round)
    REVIEWING = "reviewing"  # {"keys": [...]}: these comments went to the agent (a review round)
    IGNORED = "ignored"  # {"keys": [...]}: comments from people who may not steer
    ENDED = "ended"  # {"why"}: merged, closed, ci_rounds_used, review_rounds_used, branch_moved


@dataclass(frozen=True)
class CiRound:
    sha: str
    state: str  # ci.CiState's value
    checks: Mapping[str, str]  # name -> conclusion


@dataclass(frozen=True)
class PullRequestSession:
    repo: str
    head: str
    base: str
    number: int | None = None
    url: str = ""
    pushed: str | None = None  # the sha the engine last pushed: the lease of the next push
    pushed_at: str = ""  # when the engine last pushed
    since: str = ""  # when it first pushed: the comments on the pull request are read from then on
    reported: str | None = None  # the push the pull request's title and body report
    pushes: int = 0  # in this CI cycle (a review round starts a new one)
    ci: tuple[CiRound, ...] = ()
    review_rounds: int = 0
    acted: frozenset[str] = frozenset()  # comment keys acted on or ignored: never again
    ended: str = ""
    history: tuple[str, ...] = field(default=())  # one line per happening, for the result

    @property
    def judged(self) -> bool:
        """CI's verdict on the last push is recorded: a restart does not ask for it again."""
        return bool(self.ci) and self.ci[-1].sha == self.pushed


def _pushed(s: PullRequestSession, d: Mapping[str, Any]) -> PullRequestSession:
    return replace(s, pushed=d["sha"], pushed_at=d["at"], since=s.since or d["at"], pushes=s.pushes + 1)


def _opened(s: PullRequestSession, d: Mapping[str, Any]) -> PullRequestSession:
    return replace(s, number=int(d["number"]), url=str(d["url"]), reported=d.get("sha", s.reported))


def _ci(s: PullRequestSession, d: Mapping[str, Any]) -> PullRequestSession:
    return replace(s, ci=(*s.ci, CiRound(d["sha"], d["state"], dict(d.get("checks", {})))))


def _fixing(s: PullRequestSession, d: Mapping[str, Any]) -> PullRequestSession:
    return s


def _reviewing(s: PullRequestSession, d: Mapping[str, Any]) -> PullRequestSession:
    return replace(s, review_rounds=s.review_rounds + 1, pushes=0, acted=s.acted | frozenset(d["keys"]))


def _ignored(s: PullRequestSession, d: Mapping[str, Any]) -> PullRequestSession:
    return replace(s, acted=s.acted | frozenset(d["keys"]))


def _ended(s: PullRequestSession, d: Mapping[str, Any]) -> PullRequestSession:
    return replace(s, ended=str(d["why"]))


REDUCERS: dict[Happened, Callable[[PullRequestSession, Mapping[str, Any]], PullRequestSession]] = {
    Happened.PUSHED: _pushed,
    Happened.OPENED: _opened,
    Happened.UPDATED: _opened,
    Happened.CI: _ci,
    Happened.FIXING: _fixing,
    Happened.REVIEWING: _reviewing,
    Happened.IGNORED: _ignored,
    Happened.ENDED: _ended,
}


def apply(session: PullRequestSession, kind: Happened | str, data: Mapping[str, Any]) -> PullRequestSession:
    """The session after one happening (an ended session changes no more)."""
    if session.ended:
        return session
    kind = Happened(kind)
    after = REDUCERS[kind](session, data)
    return replace(after, history=(*after.history, kind.value))


def replay(session: PullRequestSession, records: Iterable[tuple[str, Mapping[str, Any]]]) -> PullRequestSession:
    """The session after the recorded happenings, in order (after a restart)."""
    for kind, data in records:
        session = apply(session, kind, data)
    return session


def result(session: PullRequestSession, state: str | None = None) -> dict[str, Any]:
    """`pull_request` in RESULT_last.json. `state`: the forge's word now (open, merged,
    closed), when known."""
    return {
        "repo": session.repo,
        "number": session.number,
        "url": session.url,
        "head": session.head,
        "base": session.base,
        "head_sha": session.pushed,
        "state": state or ("ended: " + session.ended if session.ended else "open" if session.number else "none"),
        "ci_rounds": [{"sha": r.sha, "state": r.state, "checks": dict(r.checks)} for r in session.ci],
        "review_rounds": session.review_rounds,
        "ended": session.ended or None,
    }
