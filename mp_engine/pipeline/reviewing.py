"""Review rounds (issue #41, docs/PULL_REQUESTS.md): between runs, the tick looks now and
then (`[repos.NAME] review_poll`) at each pull request a run left waiting for review
(forge/watch.py). Every question it asks GitHub is conditional (ETags), so a look at a pull
request where nothing changed costs no rate limit.

What a look finds, decided by forge/feedback.py:
- comments from people who may steer (`reviewers`, or anyone with write access), not yet
  acted on: the run of that MP goes on, the way an answer reopens it (answering.py): the
  comments are added to the run (`agent/reviews.jsonl`) and its ledger reopened, and the
  engine resumes it at once (one run at a time: the session is serialized with every other
  MP). Each comment is acted on once (its key is in the run's record, then in the watch);
- comments from anyone else: ignored, the event says so, once;
- the pull request merged or closed: the session ends;
- comments with `review_rounds` used up: the session ends, a person takes over (an alert);
- `merge = "when_green_and_approved"`, CI green and every steering review approving: merged.

A review recorded in the run but whose run never reopened (a crash in between) is found by
the next look and reopened then.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from mp_engine.agent.api import add_review, reviews_received
from mp_engine.core.errors import ForgeError, ForgeRateLimited
from mp_engine.forge.base import Comment, Forge, PullRequest
from mp_engine.forge.ci import CiState, CiVerdict
from mp_engine.forge.feedback import Steering, Step, may_steer_by, mergeable, next_step, prompt_text, steering
from mp_engine.forge.repository import Repository
from mp_engine.forge.watch import Watched, WatchList
from mp_engine.pipeline.context import EngineContext
from mp_engine.record.archive import RunArchive
from mp_engine.record.state import Status


class Reviewing:
    """The looks at the pull requests waiting for review; `look()` is one."""

    def __init__(self, ctx: EngineContext, repos: Mapping[str, Repository]):
        self.ctx = ctx
        self.all_repos = repos  # the engine's, shared with the agent executor
        self.watch = WatchList.at(ctx.ws.local_dir)
        self.interval = min((r.config.review_poll for r in self.repos.values()), default=0.0)
        self.next_look = 0.0  # monotonic
        self._may: dict[str, Callable[[str], bool]] = {}  # per repository: who may steer (asked once each)
        self._said: dict[str, str] = {}  # per pull request: the last failure said (once)

    @property
    def repos(self) -> dict[str, Repository]:
        """The repositories whose pull requests may wait for review."""
        return {n: r for n, r in self.all_repos.items() if r.forge is not None and r.config.land == "pull_request"}

    def due(self) -> bool:
        return bool(self.repos) and time.monotonic() >= self.next_look

    def wait_until(self) -> float | None:
        """When the next look is due (monotonic), if there is anything to look at."""
        return self.next_look if self.repos else None

    def look(self) -> RunArchive | None:
        """Look at every pull request waiting for review: the run a review reopened (for
        the engine to resume now), or None."""
        self.next_look = time.monotonic() + self.interval
        for w in self.watch.all():
            repo = self.repos.get(w.repo)
            if repo is None or repo.forge is None:  # no longer configured: nothing to look with
                continue
            try:
                run = self._look_at(repo, repo.forge, w)
            except ForgeRateLimited as e:  # nothing more is asked before the time GitHub gave
                self.next_look = max(self.next_look, time.monotonic() + max(0.0, e.until - time.time()))
                self._failed(w, e)
                return None
            except ForgeError as e:  # away, 5xx, a permission: said once, looked at again later
                self._failed(w, e)
                continue
            self._said.pop(w.key, None)
            if run is not None:
                return run
        return None

    def _look_at(self, repo: Repository, forge: Forge, w: Watched) -> RunArchive | None:
        run = RunArchive(self.ctx.ws.runs_dir / w.run_id)
        recorded = reviews_received(run.dir)
        if len(recorded) > w.review_rounds:  # added before a crash; its run never went on
            return self._reopen(run, w, recorded[-1]["round"], recorded[-1]["keys"], recorded[-1]["authors"])
        pr = forge.pull_request(w.number)
        said = forge.comments(w.number) + forge.review_feedback(w.number)
        acted = frozenset(w.acted) | {k for r in recorded for k in r["keys"]}
        may = self._may.setdefault(repo.name, may_steer_by(repo.config.reviewers, forge.permission))
        found = steering(said, after=w.since, acted=acted, may_steer=may)
        if found.ignored:
            self._ignored(w, found)
        step = next_step(pr, found, w.review_rounds, repo.config.review_rounds)
        if step is Step.END:
            self._ended(w, pr)
        elif step is Step.GIVE_UP:
            self._used_up(w, found)
        elif step is Step.WAIT:
            self._merge_if_approved(repo, forge, w, said, may)
        else:
            keys, authors = [c.key for c in found.act], sorted({c.author for c in found.act})
            n = add_review(run.dir, number=w.number, url=w.url, keys=keys, authors=authors, text=prompt_text(found))
            return self._reopen(run, w, n, keys, authors)
        return None

    def _reopen(self, run: RunArchive, w: Watched, n: int, keys: list[str], authors: list[str]) -> RunArchive | None:
        """The run goes on with review round `n` (its comments are in the run already)."""
        ledger = run.ledger()
        if ledger.model.status != "closed":  # open already: the engine resumes it anyway
            return None
        ledger.reopen(f"review round {n} on {w.url}", under="reviewed")
        self.ctx.state.update(
            status=Status.RUNNING,
            current=w.mp_id,
            run_id=run.run_id,
            waiting=None,
            reason=f"{w.mp_id}: review round {n} on pull request #{w.number}",
        )
        self.ctx.events.emit(
            "pull_request_review",
            mp=w.mp_id,
            run=run.run_id,
            repo=w.repo,
            number=w.number,
            url=w.url,
            round=n,
            comments=len(keys),
            authors=authors,
        )
        return run

    def _ignored(self, w: Watched, found: Steering) -> None:
        for c, why in found.ignored:
            self.ctx.events.emit(
                "pull_request_comment_ignored", mp=w.mp_id, number=w.number, author=c.author, url=c.url, why=why
            )
        self.watch.seen(w.key, [c.key for c, _ in found.ignored])

    def _ended(self, w: Watched, pr: PullRequest) -> None:
        self.watch.drop(w.key)
        self.ctx.events.emit(
            "pull_request_closed", mp=w.mp_id, run=w.run_id, number=w.number, url=w.url, state=pr.state
        )

    def _used_up(self, w: Watched, found: Steering) -> None:
        """Comments came with `review_rounds` used: a person takes the pull request over."""
        self.watch.drop(w.key)
        self.ctx.events.emit(
            "pull_request_review_rounds_used",
            mp=w.mp_id,
            run=w.run_id,
            number=w.number,
            url=w.url,
            rounds=w.review_rounds,
            authors=sorted({c.author for c in found.act}),
        )

    def _merge_if_approved(
        self, repo: Repository, forge: Forge, w: Watched, said: list[Comment], may: Callable[[str], bool]
    ) -> None:
        """`merge = "when_green_and_approved"`: CI green on the engine's last push and the
        latest review of every person who may steer approves."""
        if repo.config.merge != "when_green_and_approved" or not w.green:
            return
        if not mergeable(said, CiVerdict(CiState.PASSED), may_steer=may):
            return
        if forge.merge_pull_request(w.number, w.sha):
            self.watch.drop(w.key)
            self.ctx.events.emit("pull_request_merged", mp=w.mp_id, run=w.run_id, number=w.number, url=w.url, sha=w.sha)
        elif self._said.get(w.key) != "merge":
            self._said[w.key] = "merge"
            self.ctx.events.emit(
                "pull_request_merge_refused",
                mp=w.mp_id,
                number=w.number,
                url=w.url,
                why="GitHub would not merge it (its head moved, or a branch rule forbids it)",
            )

    def _failed(self, w: Watched, e: ForgeError) -> None:
        if self._said.get(w.key) != str(e):
            self._said[w.key] = str(e)
            self.ctx.events.emit("pull_request_look_failed", mp=w.mp_id, number=w.number, url=w.url, error=str(e))
