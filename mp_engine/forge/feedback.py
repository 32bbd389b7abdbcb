"""Review rounds, decided in pure functions: which comments steer the work (`steering`),
whether the pull request may merge (`mergeable`), and what the run does next (`next_step`).

A comment steers when it came after the engine's last push, is not the engine's own (its
marker, landing.py), was not acted on before (its key is in the run's record, so a restart
acts on none twice), and its author may steer: one of `[repos.NAME] reviewers`, or, when
that list is empty, anyone with write access. Anyone else's is ignored, and the run's
event says so (issue #41).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from mp_engine.forge.base import Comment, PullRequest
from mp_engine.forge.ci import CiVerdict
from mp_engine.forge.landing import MARKER_PREFIX

WRITERS = frozenset({"admin", "maintain", "write"})


@dataclass(frozen=True)
class Steering:
    act: tuple[Comment, ...]  # oldest first
    ignored: tuple[tuple[Comment, str], ...]  # (the comment, why)


def may_steer_by(reviewers: Iterable[str], permission: Callable[[str], str]) -> Callable[[str], bool]:
    """Who may steer: the listed reviewers, or anyone with write access (asked once each)."""
    listed = frozenset(r.lower() for r in reviewers)
    known: dict[str, bool] = {}

    def may(login: str) -> bool:
        if listed:
            return login.lower() in listed
        if login not in known:
            known[login] = permission(login) in WRITERS
        return known[login]

    return may


def steering(
    comments: Iterable[Comment], *, after: str, acted: frozenset[str], may_steer: Callable[[str], bool]
) -> Steering:
    """The comments to act on, and those ignored (with why). `after`: the last push's time
    (ISO 8601, UTC); `acted`: the keys of the comments acted on already."""
    act, ignored = [], []
    for c in sorted(comments, key=lambda c: (c.created_at, c.id)):
        if MARKER_PREFIX in c.body or c.key in acted or c.created_at < after:
            continue
        if c.kind == "review" and not c.body.strip():
            continue  # an approval or a bare review: nothing to do (mergeable() reads it)
        if not may_steer(c.author):
            ignored.append((c, f"{c.author} may not steer this pull request (not a reviewer, no write access)"))
            continue
        act.append(c)
    return Steering(tuple(act), tuple(ignored))


def mergeable(reviews: Iterable[Comment], ci: CiVerdict, *, may_steer: Callable[[str], bool]) -> bool:
    """`merge = "when_green_and_approved"`: CI green, and the latest review of every
    person who may steer approves (at least one does)."""
    latest: dict[str, str] = {}
    for r in sorted((r for r in reviews if r.kind == "review"), key=lambda r: (r.created_at, r.id)):
        if r.review_state in ("APPROVED", "CHANGES_REQUESTED") and may_steer(r.author):
            latest[r.author] = r.review_state
    return ci.green and bool(latest) and set(latest.values()) == {"APPROVED"}


class Step(StrEnum):
    END = "end"  # merged or closed: the session ends
    WAIT = "wait"  # nothing to act on yet
    ACT = "act"  # resume the run with these comments
    GIVE_UP = "give_up"  # comments came, review_rounds are used up: the result says so, a person takes over


def next_step(pr: PullRequest, found: Steering, rounds_used: int, review_rounds: int) -> Step:
    if pr.state != "open":
        return Step.END
    if not found.act:
        return Step.WAIT
    return Step.ACT if rounds_used < review_rounds else Step.GIVE_UP


def prompt_text(found: Steering) -> str:
    """The comments as the next prompt carries them: who, where, what."""
    out = []
    for c in found.act:
        where = f" on {c.path}:{c.line}" if c.path else ""
        out.append(f"- {c.author}{where} ({c.url}):\n  " + c.body.strip().replace("\n", "\n  "))
    return "\n".join(out)
