"""What the engine needs of a forge (GitHub), as one protocol and plain data.

Every method is one question or one change, keyed so that a repeat after `kill -9` finds
what the first attempt did: a pull request by its head branch, a comment by a marker in
its body, a label by its name. Failures are `ForgeError`s (core/errors.py): unavailable
(retried later), auth (with the permission needed), rate limited (with the time to wait
until), not found. `github.py` is the real implementation, `memory.py` the simplest.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol


class CheckState(StrEnum):
    """One check's verdict, whatever the forge called it."""

    PENDING = "pending"  # queued, in progress, or a status that says pending
    PASSED = "passed"  # success, neutral, skipped
    FAILED = "failed"  # failure, error, timed out, cancelled, action required, stale


# A check run's conclusion -> its state (GitHub's words); an unknown word is a failure.
RUN_CONCLUSIONS = {
    "success": CheckState.PASSED,
    "neutral": CheckState.PASSED,
    "skipped": CheckState.PASSED,
    "failure": CheckState.FAILED,
    "timed_out": CheckState.FAILED,
    "cancelled": CheckState.FAILED,
    "action_required": CheckState.FAILED,
    "startup_failure": CheckState.FAILED,
    "stale": CheckState.FAILED,
}
STATUS_STATES = {"success": CheckState.PASSED, "pending": CheckState.PENDING}


@dataclass(frozen=True)
class Check:
    """One check on a commit: a check run (GitHub Actions and apps) or a commit status."""

    name: str
    source: Literal["check_run", "status"]
    state: CheckState
    conclusion: str  # the forge's own word (`failure`, `timed_out`, `pending`, ...)
    url: str  # where a person reads it
    summary: str  # the run's output title and summary, or the status's description
    job_id: int | None = None  # a GitHub Actions job, whose log `Forge.job_log` fetches


@dataclass(frozen=True)
class CiReport:
    """Every check on one commit. `changed` is False when the forge answered that nothing
    changed since the last report (a 304 to a conditional request: no rate limit spent)."""

    sha: str
    checks: tuple[Check, ...]
    changed: bool = True

    def failing(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.state is CheckState.FAILED)

    def pending(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.state is CheckState.PENDING)


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    head: str
    base: str
    head_sha: str
    state: Literal["open", "closed", "merged"]
    title: str
    body: str


@dataclass(frozen=True)
class Comment:
    """A comment on an issue or a pull request, a review comment on a line, or a review."""

    id: int
    kind: Literal["comment", "review_comment", "review"]
    author: str
    body: str
    created_at: str  # ISO 8601, UTC, as the forge says
    url: str
    path: str | None = None  # review comments: the file
    line: int | None = None
    review_state: str | None = None  # reviews: APPROVED, CHANGES_REQUESTED, COMMENTED

    @property
    def key(self) -> str:
        """Unique across kinds (ids of comments and reviews may collide)."""
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str
    labels: tuple[str, ...]
    url: str
    author: str


@dataclass(frozen=True)
class RateState:
    """The forge's last word on the rate limit (X-RateLimit-*), for `status`."""

    limit: int
    remaining: int
    reset: float  # seconds since the epoch


class Forge(Protocol):
    """One repository on a forge."""

    slug: str  # owner/repo

    def find_pull_request(self, head: str) -> PullRequest | None:
        """The pull request from branch `head` (open first, else the latest), or None."""

    def open_pull_request(self, *, head: str, base: str, title: str, body: str) -> PullRequest:
        """Open one; `ForgeError` when the forge refuses (one from `head` is open already)."""

    def update_pull_request(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRequest:
        """Change its title or body."""

    def pull_request(self, number: int) -> PullRequest:
        """Its state now (merged, closed, the head's sha)."""

    def merge_pull_request(self, number: int, sha: str) -> bool:
        """Merge it if its head is still `sha`; False when the forge says it cannot."""

    def comments(self, number: int, since: str | None = None) -> list[Comment]:
        """The comments on an issue or a pull request (not on lines), oldest first."""

    def comment(self, number: int, body: str) -> Comment:
        """Comment on an issue or a pull request."""

    def review_feedback(self, number: int, since: str | None = None) -> list[Comment]:
        """A pull request's reviews and review comments (on lines), oldest first."""

    def ci(self, sha: str) -> CiReport:
        """Every check run and commit status on `sha`, asked conditionally."""

    def job_log(self, job_id: int, max_bytes: int = 65536) -> str:
        """The end (`max_bytes`) of a GitHub Actions job's log."""

    def permission(self, login: str) -> str:
        """`admin`, `maintain`, `write`, `triage`, `read` or `none`."""

    def labelled_issues(self, label: str) -> list[Issue]:
        """Open issues (not pull requests) with that label."""

    def add_label(self, number: int, label: str) -> None:
        """Give an issue a label (no-op when it has it)."""

    def remove_label(self, number: int, label: str) -> bool:
        """Take a label off an issue; False when it did not have it (someone else took it)."""

    def rate(self) -> RateState | None:
        """The last rate-limit state the forge reported."""
