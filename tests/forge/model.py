"""The GitHub double's state for one repository, and its answers: each built from the
description's example for the operation (tests/forge/openapi.py), the state written over.

Handlers are named `<endpoint>_<method>` after github_double.RULES and return `Served`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from werkzeug.exceptions import NotFound

from tests.forge import openapi

if TYPE_CHECKING:
    from tests.forge.github_double import GitHubDouble, Served

WEB = "https://github.com"
API = "https://api.github.com"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def user(template: dict[str, Any], login: str) -> dict[str, Any]:
    return {**template, "login": login, "html_url": f"{WEB}/{login}", "url": f"{API}/users/{login}"}


@dataclass
class Pull:
    number: int
    head: str
    base: str
    title: str
    body: str
    head_sha: str
    author: str
    state: str = "open"
    merged: bool = False
    created_at: str = field(default_factory=now)
    updated_at: str = field(default_factory=now)  # as GitHub: moves only when the pull request changes
    closed_at: str | None = None


@dataclass
class Comment:
    id: int
    number: int
    body: str
    author: str
    created_at: str = field(default_factory=now)


@dataclass
class ReviewComment:
    id: int
    number: int
    body: str
    author: str
    path: str = "README.md"
    line: int = 1
    created_at: str = field(default_factory=now)


@dataclass
class Review:
    id: int
    number: int
    author: str
    state: str  # APPROVED, CHANGES_REQUESTED, COMMENTED
    body: str = ""
    submitted_at: str = field(default_factory=now)


@dataclass
class CheckRun:
    id: int
    sha: str
    name: str
    status: str = "queued"  # queued, in_progress, completed
    conclusion: str | None = None
    app: str = "github-actions"
    summary: str = ""
    text: str = ""


@dataclass
class Status:
    sha: str
    context: str
    state: str  # error, failure, pending, success
    description: str = ""
    target_url: str = "https://ci.example.com/build/1"


@dataclass
class Issue:
    number: int
    title: str
    body: str
    labels: list[str]
    author: str = "someone"
    state: str = "open"


class Repo:
    """One repository's pull requests, comments, reviews, checks, statuses and issues."""

    def __init__(self, slug: str, ids: Iterator[int]):
        self.slug, self.ids = slug, ids
        self.pulls: dict[int, Pull] = {}
        self.comments: list[Comment] = []
        self.review_comments: list[ReviewComment] = []
        self.reviews: list[Review] = []
        self.check_runs: list[CheckRun] = []
        self.statuses: list[Status] = []
        self.issues: dict[int, Issue] = {}
        self.permissions: dict[str, str] = {}
        self.numbers = iter(range(1, 10**6))

    # --- what a test sets up ---------------------------------------------------------

    def add_issue(self, title: str, body: str = "", labels: tuple[str, ...] = ()) -> Issue:
        issue = Issue(next(self.numbers), title, body, list(labels))
        self.issues[issue.number] = issue
        return issue

    def add_check(self, sha: str, name: str, status="completed", conclusion="success", **kw) -> CheckRun:
        run = CheckRun(next(self.ids), sha, name, status, conclusion if status == "completed" else None, **kw)
        self.check_runs.append(run)
        return run

    def add_status(self, sha: str, context: str, state: str, description: str = "") -> Status:
        self.statuses = [s for s in self.statuses if (s.sha, s.context) != (sha, context)] + [
            Status(sha, context, state, description)
        ]
        return self.statuses[-1]

    def comment(self, number: int, author: str, body: str) -> Comment:
        self.comments.append(Comment(next(self.ids), number, body, author))
        return self.comments[-1]

    def review_comment(self, number: int, author: str, body: str) -> ReviewComment:
        self.review_comments.append(ReviewComment(next(self.ids), number, body, author))
        return self.review_comments[-1]

    def review(self, number: int, author: str, state: str, body: str = "") -> Review:
        self.reviews.append(Review(next(self.ids), number, author, state, body))
        return self.reviews[-1]

    # --- answers ---------------------------------------------------------------------

    def _pull_json(self, pr: Pull, operation: str) -> dict[str, Any]:
        template = openapi.example(operation, 201 if operation == "pulls/create" else 200)
        out = template[0] if isinstance(template, list) else template
        owner = self.slug.split("/")[0]
        url = f"{API}/repos/{self.slug}/pulls/{pr.number}"
        out.update(
            number=pr.number,
            id=pr.number + 5000,
            url=url,
            html_url=f"{WEB}/{self.slug}/pull/{pr.number}",
            state=pr.state,
            title=pr.title,
            body=pr.body,
            user=user(out["user"], pr.author),
            draft=False,
            created_at=pr.created_at,
            updated_at=pr.updated_at,
            closed_at=pr.closed_at,
            merged_at=pr.closed_at if pr.merged else None,
            labels=[],
            milestone=None,
            assignee=None,
            assignees=[],
            requested_reviewers=[],
            requested_teams=[],
        )
        out["head"].update(ref=pr.head, sha=pr.head_sha, label=f"{owner}:{pr.head}")
        out["base"].update(ref=pr.base, label=f"{owner}:{pr.base}")
        if "merged" in out:
            out["merged"] = pr.merged
        return out

    def _pull(self, number: int) -> Pull:
        if number not in self.pulls:
            raise NotFound()
        return self.pulls[number]

    def pulls_get(self, gh: GitHubDouble, args, body, **_) -> Served:
        from tests.forge.github_double import Served

        owner = self.slug.split("/")[0]
        state = args.get("state", "open")
        found = [
            pr
            for pr in self.pulls.values()
            if (state == "all" or pr.state == state)
            and ("head" not in args or args["head"] == f"{owner}:{pr.head}")
            and ("base" not in args or args["base"] == pr.base)
        ]
        return Served(200, [self._pull_json(pr, "pulls/list") for pr in page(found, args)], {}, "pulls/list")

    def pulls_post(self, gh: GitHubDouble, args, body, **_) -> Served:
        from tests.forge.github_double import Served

        head = body["head"].split(":")[-1]
        if any(pr.head == head and pr.state == "open" for pr in self.pulls.values()):
            owner = self.slug.split("/")[0]
            error = {
                "resource": "PullRequest",
                "code": "custom",
                "message": f"A pull request already exists for {owner}:{head}.",
            }
            return Served(422, {"message": "Validation Failed", "errors": [error], "documentation_url": "x"})
        sha = gh.head_sha(self.slug, head)
        pr = Pull(next(self.numbers), head, body["base"], body.get("title", ""), body.get("body") or "", sha, "mp-bot")
        self.pulls[pr.number] = pr
        return Served(201, self._pull_json(pr, "pulls/create"), {}, "pulls/create")

    def pull_get(self, gh: GitHubDouble, args, body, number: int) -> Served:
        from tests.forge.github_double import Served

        pr = self._pull(number)
        pr.head_sha = gh.head_sha(self.slug, pr.head) or pr.head_sha
        return Served(200, self._pull_json(pr, "pulls/get"), {}, "pulls/get")

    def pull_patch(self, gh: GitHubDouble, args, body, number: int) -> Served:
        from tests.forge.github_double import Served

        pr = self._pull(number)
        if (body.get("title", pr.title), body.get("body", pr.body)) != (pr.title, pr.body):
            pr.title, pr.body, pr.updated_at = body.get("title", pr.title), body.get("body", pr.body), now()
        self.set_state(pr, body.get("state", pr.state))
        return Served(200, self._pull_json(pr, "pulls/update"), {}, "pulls/update")

    def set_state(self, pr: Pull, state: str, *, merged: bool = False) -> None:
        """A pull request closed, merged or opened again (by a person, or the engine)."""
        if (state, merged) == (pr.state, pr.merged):
            return
        pr.state, pr.merged, pr.updated_at = state, merged, now()
        pr.closed_at = None if state == "open" else pr.closed_at or now()

    def merge_put(self, gh: GitHubDouble, args, body, number: int) -> Served:
        from tests.forge.github_double import Served

        pr = self._pull(number)
        if pr.state != "open":
            return Served(405, {"message": "Pull Request is not mergeable", "documentation_url": "x"})
        self.set_state(pr, "closed", merged=True)
        out = openapi.example("pulls/merge")
        out.update(sha=pr.head_sha, merged=True, message="Pull Request successfully merged")
        return Served(200, out, {}, "pulls/merge")

    def comments_get(self, gh: GitHubDouble, args, body, number: int) -> Served:
        from tests.forge.github_double import Served

        since = args.get("since", "")
        found = [c for c in self.comments if c.number == number and c.created_at >= since]
        template = openapi.example("issues/list-comments")[0]
        return Served(200, [self._comment_json(template, c) for c in page(found, args)], {}, "issues/list-comments")

    def comments_post(self, gh: GitHubDouble, args, body, number: int) -> Served:
        from tests.forge.github_double import Served

        if number not in self.pulls and number not in self.issues:
            raise NotFound()
        c = self.comment(number, "mp-bot", body["body"])
        out = self._comment_json(openapi.example("issues/create-comment", 201), c)
        return Served(201, out, {}, "issues/create-comment")

    def _comment_json(self, template: dict[str, Any], c: Comment) -> dict[str, Any]:
        return {
            **template,
            "id": c.id,
            "body": c.body,
            "user": user(template["user"], c.author),
            "created_at": c.created_at,
            "updated_at": c.created_at,
            "html_url": f"{WEB}/{self.slug}/issues/{c.number}#issuecomment-{c.id}",
            "issue_url": f"{API}/repos/{self.slug}/issues/{c.number}",
            "url": f"{API}/repos/{self.slug}/issues/comments/{c.id}",
        }

    def review_comments_get(self, gh: GitHubDouble, args, body, number: int) -> Served:
        from tests.forge.github_double import Served

        since = args.get("since", "")
        template = openapi.example("pulls/list-review-comments")[0]
        found = [c for c in self.review_comments if c.number == number and c.created_at >= since]
        out = [
            {
                **template,
                "id": c.id,
                "body": c.body,
                "user": user(template["user"], c.author),
                "path": c.path,
                "line": c.line,
                "created_at": c.created_at,
                "updated_at": c.created_at,
                "html_url": f"{WEB}/{self.slug}/pull/{number}#discussion_r{c.id}",
            }
            for c in page(found, args)
        ]
        return Served(200, out, {}, "pulls/list-review-comments")

    def reviews_get(self, gh: GitHubDouble, args, body, number: int) -> Served:
        from tests.forge.github_double import Served

        template = openapi.example("pulls/list-reviews")[0]
        found = [r for r in self.reviews if r.number == number]
        out = [
            {
                **template,
                "id": r.id,
                "body": r.body,
                "state": r.state,
                "user": user(template["user"], r.author),
                "submitted_at": r.submitted_at,
                "html_url": f"{WEB}/{self.slug}/pull/{number}#pullrequestreview-{r.id}",
            }
            for r in page(found, args)
        ]
        return Served(200, out, {}, "pulls/list-reviews")

    def check_runs_get(self, gh: GitHubDouble, args, body, ref: str) -> Served:
        from tests.forge.github_double import Served

        out = openapi.example("checks/list-for-ref")
        template = out["check_runs"][0]
        runs = [r for r in self.check_runs if r.sha == ref]
        out["total_count"] = len(runs)
        out["check_runs"] = [
            {
                **template,
                "id": r.id,
                "head_sha": r.sha,
                "name": r.name,
                "status": r.status,
                "conclusion": r.conclusion,
                "details_url": f"{WEB}/{self.slug}/actions/runs/1/job/{r.id}",
                "html_url": f"{WEB}/{self.slug}/runs/{r.id}",
                "app": {**template["app"], "slug": r.app},
                "output": {**template["output"], "title": r.name, "summary": r.summary, "text": r.text},
            }
            for r in page(runs, args)
        ]
        return Served(200, out, {}, "checks/list-for-ref")

    def status_get(self, gh: GitHubDouble, args, body, ref: str) -> Served:
        from tests.forge.github_double import Served

        out = openapi.example("repos/get-combined-status-for-ref")
        template = out["statuses"][0]
        found = [s for s in self.statuses if s.sha == ref]
        states = {s.state for s in found}
        overall = (
            "failure" if states & {"failure", "error"} else "pending" if "pending" in states or not found else "success"
        )
        out.update(state=overall, sha=ref, total_count=len(found))
        out["statuses"] = [
            {
                **template,
                "state": s.state,
                "context": s.context,
                "description": s.description,
                "target_url": s.target_url,
            }
            for s in found
        ]
        return Served(200, out, {}, "repos/get-combined-status-for-ref")

    def job_logs_get(self, gh: GitHubDouble, args, body, job: int) -> Served:
        from tests.forge.github_double import Served

        if job not in gh.logs:
            raise NotFound()
        location = f"{gh.log_server.server.url}/signed/{job}?sig=abc"
        return Served(302, None, {"Location": location})

    def permission_get(self, gh: GitHubDouble, args, body, user: str) -> Served:
        from tests.forge.github_double import Served

        if user not in self.permissions:
            raise NotFound()
        out = openapi.example("repos/get-collaborator-permission-level")
        level = self.permissions[user]
        out.update(permission=level, role_name=level)
        out["user"].update(login=user, role_name=level)  # required by the schema, missing from its example
        return Served(200, out, {}, "repos/get-collaborator-permission-level")

    def issues_get(self, gh: GitHubDouble, args, body, **_) -> Served:
        from tests.forge.github_double import Served

        wanted = {x for x in args.get("labels", "").split(",") if x}
        state = args.get("state", "open")
        found = [i for i in self.issues.values() if (state == "all" or i.state == state) and wanted <= set(i.labels)]
        template = openapi.example("issues/list-for-repo")[0]
        template.pop("pull_request", None)
        label = template["labels"][0]
        out = [
            {
                **template,
                "number": i.number,
                "title": i.title,
                "body": i.body,
                "state": i.state,
                "user": user(template["user"], i.author),
                "labels": [{**label, "name": n} for n in i.labels],
                "html_url": f"{WEB}/{self.slug}/issues/{i.number}",
            }
            for i in page(found, args)
        ]
        return Served(200, out, {}, "issues/list-for-repo")

    def add_labels_post(self, gh: GitHubDouble, args, body, number: int) -> Served:
        from tests.forge.github_double import Served

        issue = self.issues.get(number) or _missing()
        issue.labels += [n for n in body["labels"] if n not in issue.labels]
        return Served(200, self._labels_json(issue, "issues/add-labels"), {}, "issues/add-labels")

    def label_delete(self, gh: GitHubDouble, args, body, number: int, name: str) -> Served:
        from tests.forge.github_double import Served

        issue = self.issues.get(number) or _missing()
        if name not in issue.labels:  # as GitHub: removing a label the issue does not have is a 404
            return Served(404, {"message": "Label does not exist", "documentation_url": "x"})
        issue.labels.remove(name)
        return Served(200, self._labels_json(issue, "issues/remove-label"), {}, "issues/remove-label")

    def _labels_json(self, issue: Issue, operation: str) -> list[dict[str, Any]]:
        template = openapi.example(operation)[0]
        return [{**template, "name": n} for n in issue.labels]


def page(items: list, args) -> list:
    per_page = min(int(args.get("per_page", 30)), 100)
    start = (int(args.get("page", 1)) - 1) * per_page
    return items[start : start + per_page]


def _missing():
    raise NotFound()
