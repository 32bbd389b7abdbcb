"""Issues as a source of work (`[repos.NAME] issues_label`, opt-in; issue #41): between
runs, when nothing is queued, the tick looks now and then (`issues_poll`) at each such
repository's waiting issues and takes the oldest: it becomes an agent MP (issuemp.py)
queued like an MP that came over git (inbox/queue.py, kind `issue`), so it goes through
the normal protocol (admitted, claimed, one result, archived) and lands as a pull request
that says "Fixes #N", with one comment on the issue.

Taking is the label swap of forge/issues.py: whoever removes `issues_label` has the issue.
So that a `kill -9` loses nothing and queues nothing twice, the MP is written first to a
journal (`SYSTEM/.engine/issues_taking.json`, durably), then the labels are swapped, then
the MP is queued and the journal entry dropped. A journal entry found at the next look:
  - its MP queued already, or run already: dropped (the crash came after the queueing);
  - the issue still waiting (both labels, or only `issues_label`): taken again, normally;
  - the issue taken (only `taken_label`): this engine's removal reached GitHub before the
    crash, so its MP is queued now. (Another engine that removed the label in that same
    instant would have it too: the one window left, a few milliseconds wide; documented.)
  - the issue neither (closed, or its labels changed by a person): dropped.
An issue that cannot become an MP (no checks at all) is answered with one comment saying
what is missing and stays waiting; it is taken once it has checks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from mp_engine.core.atomic import atomic_write_json
from mp_engine.core.errors import ForgeError, ForgeRateLimited
from mp_engine.forge import issues
from mp_engine.forge.base import Forge, Issue
from mp_engine.forge.feedback import may_steer_by
from mp_engine.forge.landing import comment_once
from mp_engine.forge.repository import Repository
from mp_engine.inbox.header import sha256_hex
from mp_engine.inbox.queue import ISSUE
from mp_engine.pipeline.context import EngineContext
from mp_engine.pipeline.issuemp import compose, mp_id
from mp_engine.record.archive import runs_of

JOURNAL = "issues_taking.json"  # in SYSTEM/.engine/


class Issuing:
    """The looks at the labelled issues; `look()` is one."""

    def __init__(self, ctx: EngineContext, repos: Mapping[str, Repository]):
        self.ctx = ctx
        self.all_repos = repos  # the engine's, shared with the agent executor
        self.interval = min((r.config.issues_poll for r in self.repos.values()), default=0.0)
        self.journal = ctx.ws.local_dir / JOURNAL
        self.next_look = 0.0  # monotonic
        self._said: dict[str, str] = {}  # per issue or repository: the last thing said (once)

    @property
    def repos(self) -> dict[str, Repository]:
        """The repositories whose labelled issues are work."""
        return {n: r for n, r in self.all_repos.items() if r.forge is not None and r.config.issues_label}

    def due(self) -> bool:
        return bool(self.repos) and time.monotonic() >= self.next_look

    def wait_until(self) -> float | None:
        return self.next_look if self.repos else None

    def look(self) -> bool:
        """Take at most one waiting issue into the queue; True when one was queued."""
        self.next_look = time.monotonic() + self.interval
        for name, repo in self.repos.items():
            assert repo.forge is not None
            try:
                if self._look_at(name, repo, repo.forge):
                    return True
            except ForgeRateLimited as e:
                self.next_look = max(self.next_look, time.monotonic() + max(0.0, e.until - time.time()))
                self._failed(name, e)
                return False
            except ForgeError as e:  # away, 5xx, a permission: said once, looked at again later
                self._failed(name, e)
        return False

    def _look_at(self, name: str, repo: Repository, forge: Forge) -> bool:
        label, taken = repo.config.issues_label, repo.config.taken_label
        waiting = issues.waiting(forge, label)
        pending = {k: v for k, v in self._read().items() if v["repo"] == name}
        if pending:  # a look a crash interrupted: finish it first
            return self._recover(name, forge, waiting, pending)
        may = may_steer_by(repo.config.reviewers, forge.permission)
        for issue in waiting:
            made = compose(name, issue, repo.config.checks, may)
            if made.missing:
                self._answer_missing(name, forge, issue, made.missing)
                continue
            if self._take(name, forge, issue, made.text, label, taken):
                return True  # else another engine took it: the next one may wait still
        return False

    def _take(self, name: str, forge: Forge, issue: Issue, text: str, label: str, taken: str) -> bool:
        key = f"{name}#{issue.number}"
        data = text.encode()
        entry = {"repo": name, "number": issue.number, "mp_id": mp_id(issue), "sha256": sha256_hex(data), "text": text}
        self._write({**self._read(), key: entry})  # durable before the swap
        if not issues.take(forge, issue, label, taken):
            self._drop(key)
            self.ctx.events.emit("issue_taken_elsewhere", repo=name, number=issue.number, url=issue.url)
            return False
        return self._queue(key, entry, issue.url)

    def _recover(self, name: str, forge: Forge, waiting: list[Issue], pending: dict[str, Any]) -> bool:
        repo = self.repos[name].config
        still = {i.number: i for i in waiting}
        taken = {i.number for i in forge.labelled_issues(repo.taken_label)} - set(still)
        for key, entry in pending.items():
            if self._queued_already(entry):
                self._drop(key)
            elif entry["number"] in still:  # the swap did not happen (or not whole): take it again
                issue = still[entry["number"]]
                if issues.take(forge, issue, repo.issues_label, repo.taken_label):
                    return self._queue(key, entry, issue.url)
                self._drop(key)
            elif entry["number"] in taken:  # the swap happened, the queueing did not
                return self._queue(key, entry, "")
            else:
                self._drop(key)
        return False

    def _queued_already(self, entry: dict[str, Any]) -> bool:
        if any(q.sha256 == entry["sha256"] for q in self.ctx.inbox.queue.entries()):
            return True
        return bool(runs_of(self.ctx.ws, entry["mp_id"], entry["sha256"]))

    def _queue(self, key: str, entry: dict[str, Any], url: str) -> bool:
        if not self._queued_already(entry):
            self.ctx.inbox.queue.add(entry["text"].encode(), ISSUE)
        self._drop(key)
        self.ctx.events.emit("issue_taken", repo=entry["repo"], number=entry["number"], mp=entry["mp_id"], url=url)
        return True

    def _answer_missing(self, name: str, forge: Forge, issue: Issue, missing: str) -> None:
        key = f"{name}#{issue.number}"
        if self._said.get(key) == issue.body:  # said for this text already
            return
        comment_once(forge, issue.number, f"{mp_id(issue)}-needs-checks", missing, redact=self.ctx.redact)
        self._said[key] = issue.body
        self.ctx.events.emit("issue_not_taken", repo=name, number=issue.number, url=issue.url, why=missing)

    def _failed(self, name: str, e: ForgeError) -> None:
        if self._said.get(name) != str(e):
            self._said[name] = str(e)
            self.ctx.events.emit("issues_look_failed", repo=name, error=str(e))

    # -- the journal ------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.journal.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        atomic_write_json(self.journal, data)

    def _drop(self, key: str) -> None:
        data = self._read()
        if data.pop(key, None) is not None:
            self._write(data)
