"""The forge on GitHub (github.com or GitHub Enterprise): the `Forge` protocol over
githubkit's typed REST client (githubapi.py), GitHub's answers turned into the forge's data."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from mp_engine.core.errors import ForgeError
from mp_engine.forge.base import (
    RUN_CONCLUSIONS,
    STATUS_STATES,
    Check,
    CheckState,
    CiReport,
    Comment,
    Issue,
    PullRequest,
    RateState,
)
from mp_engine.forge.credentials import Token
from mp_engine.forge.githubapi import GitHubApi, since_param, unchanged

if TYPE_CHECKING:
    # githubkit's generated clients name a method `list`, which shadows the builtin in their
    # own annotations (`-> Response[list[IssueComment], ...]`): mypy cannot read a listing's
    # item type from them, so the listings below name it.
    from githubkit_schemas.latest import models as gh

ACTIONS_APP = "github-actions"  # its check runs' ids are the jobs' ids


class GitHubForge:
    """One repository on GitHub. `sleep`: the backoff's (tests pass a no-op)."""

    def __init__(
        self,
        slug: str,
        api_root: str,
        token: Token,
        *,
        timeout: float = 30.0,
        attempts: int = 3,
        sleep: Callable[[float], None] | None = None,
    ):
        self.slug = slug
        self.owner, self.repo = slug.split("/", 1)
        kwargs: dict[str, Any] = {"sleep": sleep} if sleep else {}
        self._api = GitHubApi(api_root, token, timeout=timeout, attempts=attempts, **kwargs)

    def __repr__(self) -> str:
        return f"<GitHubForge {self.slug}>"

    def rate(self) -> RateState | None:
        return self._api.rate()

    # --- pull requests -------------------------------------------------------------------

    def find_pull_request(self, head: str) -> PullRequest | None:
        pulls = self._api.rest.pulls
        found = self._api.call(
            f"find the pull request from {head} on {self.slug}",
            "pull_requests=read",
            lambda: pulls.list(self.owner, self.repo, head=f"{self.owner}:{head}", state="all", per_page=100),
        ).parsed_data
        if not found:
            return None
        best = next((p for p in found if p.state == "open"), max(found, key=lambda p: p.number))
        return self._pull(best)

    def open_pull_request(self, *, head: str, base: str, title: str, body: str) -> PullRequest:
        pulls = self._api.rest.pulls
        made = self._api.call(
            f"open a pull request from {head} on {self.slug}",
            "pull_requests=write",
            lambda: pulls.create(self.owner, self.repo, head=head, base=base, title=title, body=body),
            repeatable=False,  # a retry could open a second one; landing.py finds it by its head instead
        ).parsed_data
        return self._pull(made)

    def update_pull_request(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRequest:
        changes: dict[str, Any] = {k: v for k, v in (("title", title), ("body", body)) if v is not None}
        pulls = self._api.rest.pulls
        done = self._api.call(
            f"update pull request #{number} on {self.slug}",
            "pull_requests=write",
            lambda: pulls.update(self.owner, self.repo, number, **changes),
        ).parsed_data
        return self._pull(done)

    def pull_request(self, number: int) -> PullRequest:
        pulls = self._api.rest.pulls
        pr = self._api.call(
            f"read pull request #{number} on {self.slug}",
            "pull_requests=read",
            lambda: pulls.get(self.owner, self.repo, number),
        ).parsed_data
        return self._pull(pr)

    def merge_pull_request(self, number: int, sha: str) -> bool:
        pulls = self._api.rest.pulls
        try:
            merged = self._api.call(
                f"merge pull request #{number} on {self.slug}",
                "contents=write",
                lambda: pulls.merge(self.owner, self.repo, number, sha=sha),
            ).parsed_data
        except ForgeError as e:
            if " 405:" in str(e) or " 409:" in str(e):  # not mergeable, or the head moved
                return False
            raise
        return bool(merged.merged)

    def _pull(self, p: Any) -> PullRequest:
        merged = bool(getattr(p, "merged", False) or p.merged_at)
        state: Literal["open", "closed", "merged"] = "merged" if merged else "open" if p.state == "open" else "closed"
        return PullRequest(p.number, p.html_url, p.head.ref, p.base.ref, p.head.sha, state, p.title, p.body or "")

    # --- comments and reviews ------------------------------------------------------------

    def comments(self, number: int, since: str | None = None) -> list[Comment]:
        issues = self._api.rest.issues
        kwargs: dict[str, Any] = {"since": since_param(since)} if since else {}
        items: list[gh.IssueComment] = self._api.pages(
            f"read the comments on #{number} of {self.slug}",
            "issues=read",
            lambda page: issues.list_comments(self.owner, self.repo, number, per_page=100, page=page, **kwargs),
        )
        return [Comment(c.id, "comment", _login(c.user), c.body or "", _iso(c.created_at), c.html_url) for c in items]

    def comment(self, number: int, body: str) -> Comment:
        issues = self._api.rest.issues
        c = self._api.call(
            f"comment on #{number} of {self.slug}",
            "issues=write",
            lambda: issues.create_comment(self.owner, self.repo, number, body=body),
            repeatable=False,  # a retry could comment twice; landing.py looks for its marker instead
        ).parsed_data
        return Comment(c.id, "comment", _login(c.user), c.body or "", _iso(c.created_at), c.html_url)

    def review_feedback(self, number: int, since: str | None = None) -> list[Comment]:
        pulls = self._api.rest.pulls
        kwargs: dict[str, Any] = {"since": since_param(since)} if since else {}
        lines: list[gh.PullRequestReviewComment] = self._api.pages(
            f"read the review comments on #{number} of {self.slug}",
            "pull_requests=read",
            lambda page: pulls.list_review_comments(self.owner, self.repo, number, per_page=100, page=page, **kwargs),
        )
        reviews: list[gh.PullRequestReview] = self._api.pages(
            f"read the reviews of #{number} on {self.slug}",
            "pull_requests=read",
            lambda page: pulls.list_reviews(self.owner, self.repo, number, per_page=100, page=page),
        )
        out = [
            Comment(
                c.id, "review_comment", _login(c.user), c.body, _iso(c.created_at), c.html_url, c.path, c.line or None
            )
            for c in lines
        ] + [
            Comment(
                r.id, "review", _login(r.user), r.body or "", _iso(r.submitted_at), r.html_url, review_state=r.state
            )
            for r in reviews
            if r.submitted_at and (not since or _iso(r.submitted_at) >= since)
        ]
        return sorted(out, key=lambda c: (c.created_at, c.id))

    # --- CI ------------------------------------------------------------------------------

    def ci(self, sha: str) -> CiReport:
        """Check runs and commit statuses on `sha`. Both are conditional GETs: while
        neither changed, GitHub answers 304 twice and `changed` is False."""
        checks, repos = self._api.rest.checks, self._api.rest.repos
        runs = self._api.call(
            f"read the check runs of {sha[:12]} on {self.slug}",
            "checks=read",
            lambda: checks.list_for_ref(self.owner, self.repo, sha, filter_="latest", per_page=100),
        )
        statuses = self._api.call(
            f"read the commit statuses of {sha[:12]} on {self.slug}",
            "statuses=read",
            lambda: repos.get_combined_status_for_ref(self.owner, self.repo, sha, per_page=100),
        )
        found = [self._run(r) for r in runs.parsed_data.check_runs]
        found += [self._status(s) for s in statuses.parsed_data.statuses]
        changed = not (unchanged(runs) and unchanged(statuses))
        return CiReport(sha, tuple(sorted(found, key=lambda c: (c.name, c.source))), changed)

    @staticmethod
    def _run(r: Any) -> Check:
        if r.status != "completed":
            state, word = CheckState.PENDING, r.status
        else:
            word = r.conclusion or "unknown"
            state = RUN_CONCLUSIONS.get(word, CheckState.FAILED)
        output = r.output
        summary = "\n".join(x for x in (output.title, output.summary) if x) if output else ""
        slug = r.app.slug if r.app else None
        job = r.id if slug == ACTIONS_APP else None
        return Check(r.name, "check_run", state, word, r.details_url or r.html_url or "", summary, job)

    @staticmethod
    def _status(s: Any) -> Check:
        state = STATUS_STATES.get(s.state, CheckState.FAILED)
        return Check(s.context, "status", state, s.state, s.target_url or "", s.description or "")

    def job_log(self, job_id: int, max_bytes: int = 65536) -> str:
        """The log's last `max_bytes`, read as a stream. GitHub answers with a redirect to
        another origin; httpx drops the Authorization header on such a redirect, so the
        token never reaches the log's host."""
        actions = self._api.rest.actions
        response = self._api.call(
            f"read the log of job {job_id} on {self.slug}",
            "actions=read",
            lambda: actions.download_job_logs_for_workflow_run(self.owner, self.repo, job_id),
        )
        data = response.raw_response.content
        return data[-max_bytes:].decode("utf-8", errors="replace")

    # --- people and issues ---------------------------------------------------------------

    def permission(self, login: str) -> str:
        repos = self._api.rest.repos
        try:
            level = self._api.call(
                f"read {login}'s permission on {self.slug}",
                "metadata=read",
                lambda: repos.get_collaborator_permission_level(self.owner, self.repo, login),
            ).parsed_data
        except ForgeError as e:
            if "(404)" in str(e):  # not a collaborator
                return "none"
            raise
        return level.permission

    def labelled_issues(self, label: str) -> list[Issue]:
        issues = self._api.rest.issues
        items: list[gh.Issue] = self._api.pages(
            f"list the open issues labelled {label!r} on {self.slug}",
            "issues=read",
            lambda page: issues.list_for_repo(
                self.owner, self.repo, labels=label, state="open", per_page=100, page=page
            ),
        )
        return [
            Issue(i.number, i.title, i.body or "", tuple(_label(x) for x in i.labels), i.html_url, _login(i.user))
            for i in items
            if not i.pull_request  # GitHub lists pull requests as issues too
        ]

    def add_label(self, number: int, label: str) -> None:
        issues = self._api.rest.issues
        self._api.call(
            f"label #{number} {label!r} on {self.slug}",
            "issues=write",
            lambda: issues.add_labels(self.owner, self.repo, number, labels=[label]),
        )

    def remove_label(self, number: int, label: str) -> bool:
        issues = self._api.rest.issues
        try:
            self._api.call(
                f"take the label {label!r} off #{number} on {self.slug}",
                "issues=write",
                lambda: issues.remove_label(self.owner, self.repo, number, label),
            )
        except ForgeError as e:
            if "(404)" in str(e):  # it has no such label (any more): someone else took it
                return False
            raise
        return True

    def close(self) -> None:
        """Close the connections."""
        self._api.close()


def _login(user: Any) -> str:
    return user.login if user else "ghost"


def _label(label: Any) -> str:
    return label if isinstance(label, str) else label.name


def _iso(value: datetime | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
