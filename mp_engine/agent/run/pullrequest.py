"""The rounds of a run that lands as a pull request (`land = "pull_request"`, issue #41),
after its tasks pass: the work branch pushed under a lease, one pull request opened or
brought up to date, then CI on that push. Green: the run ends, the pull request waits for
review (reviews.py brings a reviewer's comments back into the run). Red with rounds left:
CI's verdict goes into the run (state/ci.py) as a task with the failing checks' words, the
agent fixes, the engine pushes again. Red with the rounds used up: the run ends BLOCKED and
the pull request stays open for a person.

Every happening (pushed, opened or updated, CI's verdict) is a ledger step recorded before
the next action and replayed on re-entry (forge/session.py), and each action first asks
whether the record says it happened, so `kill -9` anywhere repeats nothing:
- a push whose record was lost is found on the remote (the mirror's fetch at re-entry has
  the branch at the run's own tip) and recorded, not pushed again;
- a pull request whose opening was lost is found by its head (landing.py);
- CI's verdict on a push is asked for until one is recorded, never after, so no round is
  counted twice;
- a push goes out only under a lease (the engine's last push, or for the first push a tip
  the work already contains), so a person's push is never overwritten.

What cannot be done now is waited out: CI running, the forge away (5xx, no answer) or
rate-limited, the repository's remote unreachable; each wait is one pause and one event
when it begins, one when it ends, however many looks it takes. What asking again would
not change ends the MP BLOCKED with the words of git or the forge and the fix: a person's
push on the branch, refused credentials, a 401/403, any other answer of the forge (404,
422), any other git failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.run.publisher import Publisher, iso_utc
from mp_engine.agent.run.repo import PR_STEP, RepoRun, lease_for
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.run.workbranch import LEFTOVERS, Landing, WorkBranch
from mp_engine.agent.state import ci as ci_state
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import Effect, RecordKind
from mp_engine.agent.state.model import RunState
from mp_engine.core.clock import now_iso, parse_iso
from mp_engine.core.errors import (
    BranchMoved,
    CredentialsRefused,
    ForgeAuthError,
    ForgeError,
    ForgeRateLimited,
    ForgeUnavailable,
    RemoteUnreachable,
    SyncError,
)
from mp_engine.execute.base import ExecResult
from mp_engine.forge import ci
from mp_engine.forge.landing import PullRequestReport, Task, comment_once, issue_comment, open_or_update
from mp_engine.forge.session import Happened
from mp_engine.forge.session import apply as happen
from mp_engine.forge.session import result as session_result
from mp_engine.forge.watch import Watched, WatchList

TEXT_CAP = 6000  # what the failing checks said, in the fix task's text
AWAY_RETRY = 60.0  # seconds before the forge is asked again after an outage (or `ci_poll`, when set)
# Why a session ended that a person must look at (agent/judge/certificate.py's reasons).
GIT_FAILED, FORGE_REFUSED = "pull_request_git", "pull_request_forge"


class PullRequestRounds:
    """The rounds after a run's tasks pass, for `land = "pull_request"`."""

    def __init__(
        self,
        rr: RepoRun,
        work: WorkBranch,
        steps: AgentSteps,
        publisher: Publisher,
        *,
        run_id: str,
        title: str,
        redact: Callable[[str], str],
        emit: Callable[..., None],
        watch: WatchList,
    ):
        """`watch`: the pull requests the engine looks at for review (a run that ends EXACT
        puts its own there)."""
        self.rr, self.work, self.steps, self.publisher = rr, work, steps, publisher
        self.run_id, self.title, self.redact, self.emit = run_id, title, redact, emit
        self.watch = watch
        self.session = rr.session(steps.ledger, steps.steps_dir)
        self.ci_said = ""  # CI's last word on the push, for `status`

    def round(self, state: RunState) -> ExecResult | None:
        """After the scheduler: push, open, judge CI. An ExecResult to wait (CI runs, the
        forge or the repository's remote is away, a rate limit); None when the run goes on
        (a fix task was added) or ends (green, the rounds used up, a person's push in the
        way, git or the forge saying no). A wait is said once when it begins and once when
        it ends, however many looks it takes."""
        waiting = self._round(state)
        if waiting is None:
            self.publisher.end_poll(state)
        return waiting

    def _round(self, state: RunState) -> ExecResult | None:
        if state.final is None or state.final.type != cert.EXACT:
            return None
        try:
            if self.work.path.exists() and self._tip() != self.session.pushed:
                self._push()
            if self.session.pushed is not None and self.session.reported != self.session.pushed:
                self._report_push(state)
            waiting = None if self.session.judged else self._judge(state)  # judged: a restart after the verdict
            if waiting is None:
                self.show()
            return waiting
        except BranchMoved as e:
            self.end(state, "branch_moved", str(e))
        except CredentialsRefused as e:
            self.end(state, "forge_auth", str(e))
        except RemoteUnreachable as e:  # the repository's remote is away: pushed again later, no halt
            why = f"[repos.{self.rr.repo.name}] could not be reached: {e}"
            return self._wait(state, "repository", why, time.time() + (self.rr.cfg.ci_poll or AWAY_RETRY))
        except SyncError as e:  # git failed otherwise: trying again changes nothing
            self.end(state, GIT_FAILED, str(e), self._git_fix())
        except ForgeAuthError as e:
            self.end(state, "forge_auth", str(e))
        except ForgeRateLimited as e:
            return self._wait(state, "forge_rate_limit", str(e), max(e.until, time.time() + 1))
        except ForgeUnavailable as e:  # unreachable, 5xx: asked again later, no halt
            return self._wait(state, "forge_unavailable", str(e), time.time() + (self.rr.cfg.ci_poll or AWAY_RETRY))
        except ForgeError as e:  # 404, 422, another answer: asking again would get the same
            self.end(state, FORGE_REFUSED, str(e), self._forge_fix())
        return None

    def _git_fix(self) -> str:
        repo = self.rr.repo
        return (
            f"Read git's words above and fix what they name: the remote ({repo.config.url}), or the engine's mirror "
            f"of it (`git --git-dir {repo.mirror.git_dir} fsck`); the work is on branch `{self.rr.branch}` there. "
            f"Then send the MP again with `Approves: {self.rr.mp_id}`."
        )

    def _forge_fix(self) -> str:
        name = self.rr.repo.name
        kept = f" (pull request {self.session.url} stays open for a person)" if self.session.url else ""
        return (
            f"Read GitHub's answer above: check that [repos.{name}] url and api_url name the repository and that "
            f"the token can see it (docs/PULL_REQUESTS.md){kept}, then send the MP again with "
            f"`Approves: {self.rr.mp_id}`."
        )

    def _tip(self) -> str:
        if self.work.leftovers():
            self.work.commit(f"{self.work.mp_id}: {LEFTOVERS}")
        return self.work._git("rev-parse", "HEAD", cwd=self.work.path).out.strip()

    def _record(self, kind: str, name: str, rec: dict[str, Any]) -> None:
        step = self.steps.start(name, kind, name, str(len(self.steps.ledger.model.steps)))
        self.steps.finish(step, rec, ok=True)

    def _happened(self, what: Happened, rec: dict[str, Any]) -> None:
        """A happening, recorded (a `PR-<n>` step) before anything else is done."""
        rec = {"happened": what.value, **rec}
        self._record(PR_STEP, f"PR-{len(self.session.history) + 1}", rec)
        self.session = happen(self.session, what, rec)

    def _push(self) -> None:
        """The work branch onto the remote, under the lease; a push a crash cut off before
        its record (the remote has the run's tip) is recorded, not made again."""
        mirror, branch = self.rr.repo.mirror, self.rr.branch
        tip = self._tip()
        there = mirror.branches().get(branch)  # as the fetch at this entry (or the last push) saw it
        if there == tip:
            when = self.work._git("log", "-1", "--format=%ct", tip, cwd=self.work.path).out.strip()
            at = iso_utc(float(when))  # comments since its commit count as after it: none is lost
            self.emit("pull_request_push_found", id="MPE-PR-PUSH", repo=self.rr.repo.name, branch=branch, sha=tip)
        else:
            at = now_iso()
            lease = self.session.pushed or lease_for(self.work, there, tip)
            tip = mirror.push(self.work.path, branch, expect=lease)
            self.emit("pull_request_pushed", id="MPE-PR-PUSH", repo=self.rr.repo.name, branch=branch, sha=tip)
        self._happened(Happened.PUSHED, {"sha": tip, "at": at})

    def _report_push(self, state: RunState) -> None:
        """The one pull request, opened or its body brought up to the push (found by its
        head after a crash, never a second); the issue commented once."""
        forge = self.rr.repo.forge
        assert forge is not None
        report = self._report(state)
        pr = open_or_update(forge, head=self.rr.branch, base=self.rr.base, report=report, redact=self.redact)
        what = Happened.UPDATED if pr.number == self.session.number else Happened.OPENED
        self._happened(what, {"number": pr.number, "url": pr.url, "sha": self.session.pushed})
        if what is Happened.OPENED:
            self.emit("pull_request_opened", id="MPE-PR-OPEN", repo=self.rr.repo.name, number=pr.number, url=pr.url)
        if self.rr.issue is not None:
            comment_once(forge, self.rr.issue, self.rr.mp_id, issue_comment(pr, self.rr.mp_id), redact=self.redact)

    def _judge(self, state: RunState) -> ExecResult | None:
        forge, cfg = self.rr.repo.forge, self.rr.cfg
        assert forge is not None and self.session.pushed is not None
        waited = (datetime.now(UTC) - parse_iso(self.session.pushed_at)).total_seconds()
        verdict = ci.judge(forge.ci(self.session.pushed), waited, timeout=cfg.ci_timeout)
        step = ci.next_step(verdict, self.session.pushes, cfg.ci_rounds)
        self.ci_said = verdict.describe()
        if step is ci.Step.WAIT:
            delay = cfg.ci_poll or ci.poll_delay(waited)
            return self._wait(state, "ci", f"{verdict.describe()} on {self.session.url}", time.time() + delay)
        text = ci.failure_text(forge, verdict, max_bytes=TEXT_CAP) if step is not ci.Step.DONE else ""
        rec = {
            "round": self.session.pushes,
            "sha": self.session.pushed,
            "state": verdict.state.value,
            "step": step.value,
            "checks": {c.name: c.conclusion for c in verdict.failing + verdict.pending},
            "failing": [c.name for c in verdict.failing],
            "text": self.redact(text)[-TEXT_CAP:],
            "url": self.session.url,
            "seq": state.applied + 1,
        }
        self._record(RecordKind.CI.value, f"CI-{len(self.session.ci) + 1}", rec)
        self.session = happen(self.session, Happened.CI, rec)
        self._act(apply(state, RecordKind.CI, rec))
        return None

    def _wait(self, state: RunState, kind: str, reason: str, until: float) -> ExecResult:
        self.ci_said = reason if kind == "ci" else self.ci_said
        self.show(waiting={"kind": kind, "reason": reason})
        return self.publisher.wait(state, kind, reason, iso_utc(until), polled=True)

    def end(self, state: RunState, why: str, detail: str, fix: str | None = None) -> None:
        """The session ends (a person's push in the way, a token without the permission,
        git or the forge saying no): recorded as CI's last word on it, so the run ends
        BLOCKED on replay too; `fix`: the one the result proposes, when the reason's
        default does not say enough."""
        rec = {
            "round": self.session.pushes,
            "sha": self.session.pushed or "",
            "state": "ended",
            "step": ci_state.ENDED,
            "why": why,
            "detail": self.redact(detail),
            "url": self.session.url,
            "seq": state.applied + 1,
            **({"fix": self.redact(fix)} if fix else {}),
        }
        self._record(RecordKind.CI.value, f"CI-{len(self.session.ci) + 1}", rec)
        self.session = happen(self.session, Happened.ENDED, rec)
        self._act(apply(state, RecordKind.CI, rec))
        self.show()

    def _act(self, effects: list[Effect]) -> None:
        for e in effects:
            self.emit(e.name, id=e.event_id, **e.fields)

    def _report(self, state: RunState) -> PullRequestReport:
        commits = self.work.task_commits()
        tasks = tuple(Task(t.mt_id, t.title, commits.get(t.mt_id, "")) for t in state.tasks if t.mt_id in commits)
        last = state.last_record or {}
        checks = tuple((c["id"], bool(c["ok"])) for c in last.get("checks", []))
        used = state.usage.total
        tokens = used["input"] + used["output"] + used["cache_read"] + used["cache_write"]
        cost = used["cost_usd"] if used["priced"] else None
        final = state.final.type if state.final else "?"
        return PullRequestReport(
            self.rr.mp_id, self.title, self.run_id, final, tasks, checks, tokens or None, cost, self.rr.issue
        )

    def show(self, **extra: Any) -> None:
        """The pull request in the run's progress, for `status` and the heartbeat: the
        session, CI's last word on the push and the rounds' bounds."""
        self.publisher.progress.data["pull_request"] = {
            **self.result(),
            "ci_now": self.ci_said or (self.session.ci[-1].state if self.session.ci else ""),
            "ci_rounds_max": self.rr.cfg.ci_rounds,
            "review_rounds_max": self.rr.cfg.review_rounds,
            **extra,
        }

    def landing(self) -> Landing:
        """What the result says of the work: the pull request, and CI on it. The pull request
        is watched for review from now on."""
        s = self.session
        last = s.ci[-1].state if s.ci else "not judged"
        if s.number is not None and s.pushed is not None:
            self.watch.put(
                Watched(
                    self.rr.repo.name,
                    s.number,
                    s.url,
                    s.head,
                    s.base,
                    self.run_id,
                    self.rr.mp_id,
                    s.since,
                    s.pushed,
                    last in (ci.CiState.PASSED, ci.CiState.NO_CI),
                    s.review_rounds,
                    tuple(sorted(s.acted)),
                )
            )
        rounds = ", ".join(r.state for r in s.ci) or "none"
        return Landing(
            self.rr.branch,
            False,
            "pull_request",
            s.pushed,
            f"Pull request #{s.number} ({s.url}) from `{self.rr.branch}` into `{self.rr.base}` on "
            f"[repos.{self.rr.repo.name}]; CI: {last} (rounds: {rounds}); review rounds: {s.review_rounds} of "
            f"{self.rr.cfg.review_rounds}. It waits for review: a comment from a reviewer resumes this run.",
        )

    def unwatch(self) -> None:
        """The run ended short of EXACT: a person takes the pull request over from here."""
        if self.session.number is not None:
            self.watch.drop(f"{self.rr.repo.name}#{self.session.number}")

    def result(self) -> dict[str, Any]:
        return {**session_result(self.session), "pushed_at": self.session.pushed_at or None}
