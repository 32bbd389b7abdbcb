"""The simplest forge: pull requests, comments, checks and issues in memory, with the same
answers as GitHub's (one open pull request per head, a label removed once). For tests of
what drives a forge (the agent run's rounds) without HTTP; tests/forge/ has the GitHub
double for the real client."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from mp_engine.core.errors import ForgeError, ForgeNotFound
from mp_engine.forge.base import Check, CiReport, Comment, Issue, PullRequest, RateState


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class MemoryForge:
    slug: str = "me/app"
    pulls: dict[int, PullRequest] = field(default_factory=dict)
    notes: list[Comment] = field(default_factory=list)  # comments on issues and pull requests
    on: dict[int, int] = field(default_factory=dict)  # comment id -> issue or pull request number
    feedback: dict[int, list[Comment]] = field(default_factory=dict)  # pull request -> reviews, review comments
    checks: dict[str, tuple[Check, ...]] = field(default_factory=dict)  # sha -> checks
    logs: dict[int, str] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)
    heads: dict[str, str] = field(default_factory=dict)  # branch -> sha
    login: str = "mp-bot"
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _seen: dict[str, tuple[Check, ...]] = field(default_factory=dict)

    def find_pull_request(self, head: str) -> PullRequest | None:
        found = [p for p in self.pulls.values() if p.head == head]
        return next((p for p in found if p.state == "open"), max(found, key=lambda p: p.number, default=None))

    def open_pull_request(self, *, head: str, base: str, title: str, body: str) -> PullRequest:
        if any(p.head == head and p.state == "open" for p in self.pulls.values()):
            raise ForgeError(f"GitHub answered open a pull request from {head} with 422: Validation Failed")
        number = next(self._ids)
        url = f"https://github.com/{self.slug}/pull/{number}"
        pr = PullRequest(number, url, head, base, self.heads.get(head, ""), "open", title, body)
        self.pulls[number] = pr
        return pr

    def update_pull_request(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRequest:
        pr = self.pull_request(number)
        self.pulls[number] = replace(
            pr, title=pr.title if title is None else title, body=pr.body if body is None else body
        )
        return self.pulls[number]

    def pull_request(self, number: int) -> PullRequest:
        if number not in self.pulls:
            raise ForgeNotFound(f"no pull request #{number}")
        pr = self.pulls[number]
        return replace(pr, head_sha=self.heads.get(pr.head, pr.head_sha))

    def merge_pull_request(self, number: int, sha: str) -> bool:
        pr = self.pull_request(number)
        if pr.state != "open" or pr.head_sha != sha:
            return False
        self.pulls[number] = replace(pr, state="merged")
        return True

    def comments(self, number: int, since: str | None = None) -> list[Comment]:
        return [c for c in self.notes if self.on[c.id] == number and (not since or c.created_at >= since)]

    def comment(self, number: int, body: str, *, author: str | None = None) -> Comment:
        if number not in self.pulls and number not in self.issues:
            raise ForgeNotFound(f"no issue or pull request #{number}")
        c = Comment(
            next(self._ids),
            "comment",
            author or self.login,
            body,
            _now(),
            f"https://github.com/{self.slug}/issues/{number}",
        )
        self.notes.append(c)
        self.on[c.id] = number
        return c

    def review_feedback(self, number: int, since: str | None = None) -> list[Comment]:
        return [c for c in self.feedback.get(number, []) if not since or c.created_at >= since]

    def ci(self, sha: str) -> CiReport:
        now = self.checks.get(sha, ())
        changed = self._seen.get(sha) != now
        self._seen[sha] = now
        return CiReport(sha, now, changed)

    def job_log(self, job_id: int, max_bytes: int = 65536) -> str:
        if job_id not in self.logs:
            raise ForgeNotFound(f"no log for job {job_id}")
        return self.logs[job_id][-max_bytes:]

    def permission(self, login: str) -> str:
        return self.permissions.get(login, "none")

    def labelled_issues(self, label: str) -> list[Issue]:
        return [i for i in self.issues.values() if label in i.labels]

    def add_label(self, number: int, label: str) -> None:
        issue = self.issues[number]
        if label not in issue.labels:
            self.issues[number] = replace(issue, labels=(*issue.labels, label))

    def remove_label(self, number: int, label: str) -> bool:
        issue = self.issues[number]
        if label not in issue.labels:
            return False
        self.issues[number] = replace(issue, labels=tuple(x for x in issue.labels if x != label))
        return True

    def rate(self) -> RateState | None:
        return None
