"""Landing as a pull request: one per work branch, opened or updated, and one comment on
the issue it answers, each safe to repeat after `kill -9` (issue #41).

The pull request is found by its head branch before one is opened, and again when the
forge did not answer the opening (it may have opened it all the same), so there is never a
second. Each comment the engine writes carries a marker (`<!-- mp-engine:KEY -->`); one is
written only when no comment with its marker is there yet. The marker also tells the
review rounds which comments are the engine's own (feedback.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mp_engine.core.errors import ForgeError, ForgeUnavailable
from mp_engine.forge.base import Comment, Forge, PullRequest

MARKER = "<!-- mp-engine:{key} -->"
MARKER_PREFIX = "<!-- mp-engine:"
BODY_LIMIT = 60_000  # GitHub refuses a body over 65,536 characters


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    commit: str


@dataclass(frozen=True)
class PullRequestReport:
    """What a pull request's body says: the run's result, as the agent run has it."""

    mp_id: str
    title: str
    run_id: str
    certificate: str  # EXACT, UNVERIFIED, ...
    tasks: tuple[Task, ...] = ()
    checks: tuple[tuple[str, bool], ...] = ()  # (the check, passed)
    tokens: int | None = None
    cost_usd: float | None = None
    issue: int | None = None
    notes: tuple[str, ...] = field(default=())


def pull_request_title(report: PullRequestReport) -> str:
    return f"{report.mp_id}: {report.title}".strip().removesuffix(":")[:250]


def pull_request_body(report: PullRequestReport) -> str:
    """The body: the result in Markdown, "Fixes #N" for an issue, the engine's marker."""
    lines = [f"**{report.mp_id}** {report.title}", ""]
    if report.issue is not None:
        lines += [f"Fixes #{report.issue}", ""]
    lines += [f"Certificate: **{report.certificate}** · run `{report.run_id}`"]
    spent = [
        f"{report.tokens:,} tokens" if report.tokens is not None else "",
        f"${report.cost_usd:.2f}" if report.cost_usd is not None else "",
    ]
    if any(spent):
        lines[-1] += " · " + ", ".join(s for s in spent if s)
    if report.tasks:
        lines += ["", "| task | title | commit |", "|---|---|---|"]
        lines += [f"| {t.id} | {_cell(t.title)} | {t.commit[:12]} |" for t in report.tasks]
    if report.checks:
        lines += ["", "Checks:"] + [f"- {'✅' if ok else '❌'} `{_cell(name)}`" for name, ok in report.checks]
    if report.notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in report.notes]
    text = "\n".join(lines)
    if len(text) > BODY_LIMIT:
        text = text[:BODY_LIMIT] + f"\n\n… (cut; the whole result is in the run archive `{report.run_id}`)"
    return text + "\n\n" + MARKER.format(key=report.mp_id) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:200]


def open_or_update(
    forge: Forge, *, head: str, base: str, report: PullRequestReport, redact: Callable[[str], str]
) -> PullRequest:
    """The one pull request from `head`: opened, or its title and body brought up to date.
    `redact` masks secrets in what leaves the machine (the engine's redactor)."""
    title, body = redact(pull_request_title(report)), redact(pull_request_body(report))
    pr = forge.find_pull_request(head)
    if pr is None or pr.state != "open":  # none yet, or an earlier one closed or merged: a new one
        try:
            return forge.open_pull_request(head=head, base=base, title=title, body=body)
        except ForgeError:  # no answer, or "one is open already": it may be there all the same
            pr = forge.find_pull_request(head)
            if pr is None or pr.state != "open":
                raise
    if (pr.title, pr.body) != (title, body):
        return forge.update_pull_request(pr.number, title=title, body=body)
    return pr


def comment_once(forge: Forge, number: int, key: str, text: str, *, redact: Callable[[str], str]) -> Comment:
    """Comment `text` on issue or pull request `number` unless a comment marked `key` is
    there already (a repeat after a crash); the comment found or made."""
    marker = MARKER.format(key=key)
    found = next((c for c in forge.comments(number) if marker in c.body), None)
    if found is not None:
        return found
    body = redact(text) + "\n\n" + marker + "\n"
    try:
        return forge.comment(number, body)
    except ForgeUnavailable:  # it may have been written all the same: look before the caller retries
        found = next((c for c in forge.comments(number) if marker in c.body), None)
        if found is None:
            raise
        return found


def issue_comment(pr: PullRequest, mp_id: str) -> str:
    """The one comment an MP's `Issue:` gets: where its work is."""
    return f"{mp_id} answers this issue with pull request #{pr.number}: {pr.url}"
