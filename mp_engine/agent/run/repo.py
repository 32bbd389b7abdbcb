"""An agent MP's `Repo:` (issue #41): where its branch and worktrees live (the repository's
mirror, not the channel), how its verified work lands there, and, for `land =
"pull_request"`, the rounds after its tasks pass: the work branch pushed under a lease, one
pull request opened or updated, then CI on that push. Green: the run ends, the pull request
waiting for review. Red with rounds left: CI's verdict goes into the run (state/ci.py) as a
task with the failing checks' words, the agent fixes, the engine pushes again. Red with the
rounds used up: the run ends BLOCKED and the pull request stays open for a person.

Every happening (pushed, opened, CI's verdict) is a ledger step recorded before the next
action, replayed on re-entry (forge/session.py): after `kill -9` the pull request is found by
its head branch, a push never overwrites a person's (the lease), and no round is lost. While
CI runs, the run waits (`status` says so) and the engine comes back to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mp_engine.agent.judge import certificate as cert
from mp_engine.agent.run.publisher import Publisher, iso_utc
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.run.workbranch import LEFTOVERS, Landing, Where, WorkBranch
from mp_engine.agent.state import ci as ci_state
from mp_engine.agent.state.apply import apply
from mp_engine.agent.state.kinds import RecordKind
from mp_engine.agent.state.model import RunState
from mp_engine.core.clock import now_iso, parse_iso
from mp_engine.core.errors import BranchMoved, ForgeAuthError, ForgeError, ForgeRateLimited, MpEngineError
from mp_engine.execute.base import ExecResult
from mp_engine.forge import ci
from mp_engine.forge.landing import PullRequestReport, Task, comment_once, issue_comment, open_or_update
from mp_engine.forge.mirror import TRACKING
from mp_engine.forge.repository import Repository
from mp_engine.forge.session import Happened, PullRequestSession
from mp_engine.forge.session import apply as happen
from mp_engine.forge.session import result as session_result
from mp_engine.record.ledger import Ledger, StepStatus, read_artifact

PR_STEP = "pr"  # the kind of a happening's ledger step (`PR-<n>`); CI's verdicts are kind `ci`
TEXT_CAP = 6000  # what the failing checks said, in the fix task's text


class RepoRun:
    def __init__(self, repo: Repository, *, mp_id: str, base: str | None, issue: int | None):
        self.repo = repo
        self.cfg = repo.config
        self.mp_id = mp_id
        self.base = repo.base(base)
        self.branch = Repository.work_branch(mp_id)
        self.issue = issue

    def where(self) -> Where:
        """The mirror brought up to date, and where the run's branch starts: the branch as
        the remote has it (a restarted run, the next round), else the base."""
        mirror = self.repo.mirror
        mirror.fetch()
        start = mirror.start_point(self.branch, self.base)
        return Where(mirror.git_dir, mirror.home / "work", start=start, upstream=TRACKING + self.base)

    def session(self, ledger: Ledger, steps_dir: Any) -> PullRequestSession:
        """The pull request's session as the ledger recorded it."""
        s = PullRequestSession(self.repo.name, self.branch, self.base)
        for step in ledger.model.steps:
            if step.kind not in (PR_STEP, RecordKind.CI.value) or step.status is not StepStatus.COMPLETED:
                continue
            rec = read_artifact(steps_dir, step) or {}
            if step.kind == PR_STEP:
                s = happen(s, rec["happened"], rec)
            else:
                s = happen(s, Happened.ENDED if rec["step"] == ci_state.ENDED else Happened.CI, rec)
        return s


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
    ):
        self.rr, self.work, self.steps, self.publisher = rr, work, steps, publisher
        self.run_id, self.title, self.redact, self.emit = run_id, title, redact, emit
        self.session = rr.session(steps.ledger, steps.steps_dir)

    def round(self, state: RunState) -> ExecResult | None:
        """After the scheduler: push, open, judge CI. An ExecResult to wait (CI runs, the
        forge is away or rate-limited); None when the run goes on (a fix task was added) or
        ends (green, or the rounds used up, or a person's push in the way)."""
        if state.final is None or state.final.type != cert.EXACT:
            return None
        try:
            if self.work.path.exists() and self._tip() != self.session.pushed:
                self._push(state)
            return self._judge(state)
        except BranchMoved as e:
            self._end(state, "branch_moved", str(e))
        except ForgeAuthError as e:
            self._end(state, "forge_auth", str(e))
        except ForgeRateLimited as e:
            return self.publisher.wait(state, "forge_rate_limit", str(e), iso_utc(max(e.until, time.time() + 1)))
        except ForgeError as e:  # unreachable, 5xx: retried later, no halt
            return self.publisher.wait(state, "forge_unavailable", str(e), iso_utc(time.time() + 60))
        return None

    def _tip(self) -> str:
        if self.work.leftovers():
            self.work.commit(f"{self.work.mp_id}: {LEFTOVERS}")
        return self.work._git("rev-parse", "HEAD", cwd=self.work.path).out.strip()

    def _record(self, kind: str, name: str, rec: dict[str, Any]) -> None:
        step = self.steps.start(name, kind, name, str(len(self.steps.ledger.model.steps)))
        self.steps.finish(step, rec, ok=True)

    def _push(self, state: RunState) -> None:
        mirror, forge = self.rr.repo.mirror, self.rr.repo.forge
        sha = mirror.push(self.work.path, self.rr.branch, expect=self.session.pushed)
        rec: dict[str, Any] = {"happened": Happened.PUSHED.value, "sha": sha, "at": now_iso()}
        self._record(PR_STEP, f"PR-{len(self.session.history) + 1}", rec)
        self.session = happen(self.session, Happened.PUSHED, rec)
        self.emit("pull_request_pushed", id="MPE-PR-PUSH", repo=self.rr.repo.name, branch=self.rr.branch, sha=sha)
        assert forge is not None
        pr = open_or_update(
            forge, head=self.rr.branch, base=self.rr.base, report=self._report(state), redact=self.redact
        )
        if pr.number != self.session.number:
            rec = {"happened": Happened.OPENED.value, "number": pr.number, "url": pr.url}
            self._record(PR_STEP, f"PR-{len(self.session.history) + 1}", rec)
            self.session = happen(self.session, Happened.OPENED, rec)
            self.emit("pull_request_opened", id="MPE-PR-OPEN", repo=self.rr.repo.name, number=pr.number, url=pr.url)
        if self.rr.issue is not None:
            comment_once(forge, self.rr.issue, self.rr.mp_id, issue_comment(pr, self.rr.mp_id), redact=self.redact)

    def _judge(self, state: RunState) -> ExecResult | None:
        forge, cfg = self.rr.repo.forge, self.rr.cfg
        assert forge is not None and self.session.pushed is not None
        waited = (datetime.now(UTC) - parse_iso(self.session.pushed_at)).total_seconds()
        verdict = ci.judge(forge.ci(self.session.pushed), waited, timeout=cfg.ci_timeout)
        step = ci.next_step(verdict, self.session.pushes, cfg.ci_rounds)
        if step is ci.Step.WAIT:
            delay = cfg.ci_poll or ci.poll_delay(waited)
            return self.publisher.wait(
                state, "ci", f"{verdict.describe()} on {self.session.url}", iso_utc(time.time() + delay)
            )
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

    def _end(self, state: RunState, why: str, detail: str) -> None:
        """The session ends (a person's push in the way, a token without the permission):
        recorded as CI's last word on it, so the run ends BLOCKED on replay too."""
        rec = {
            "round": self.session.pushes,
            "sha": self.session.pushed or "",
            "state": "ended",
            "step": ci_state.ENDED,
            "why": why,
            "detail": detail,
            "url": self.session.url,
            "seq": state.applied + 1,
        }
        self._record(RecordKind.CI.value, f"CI-{len(self.session.ci) + 1}", rec)
        self.session = happen(self.session, Happened.ENDED, rec)
        self._act(apply(state, RecordKind.CI, rec))

    def _act(self, effects: list[Any]) -> None:
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

    def landing(self) -> Landing:
        """What the result says of the work: the pull request, and CI on it."""
        s = self.session
        last = s.ci[-1].state if s.ci else "not judged"
        return Landing(
            self.rr.branch,
            False,
            "pull_request",
            s.pushed,
            f"Pull request #{s.number} ({s.url}) from `{self.rr.branch}` into `{self.rr.base}` on "
            f"[repos.{self.rr.repo.name}]; CI: {last}.",
        )

    def result(self) -> dict[str, Any]:
        return session_result(self.session)


class RepoLanding:
    """How a run on a configured repository lands at its end: the pull request the rounds
    carried (`land = "pull_request"`), or the work branch pushed (`branch`), or pushed onto
    the base (`merge`: a fast-forward, else a merge commit made in the run's worktree). Work
    that did not pass is pushed to its branch, never to the base, for a person to look at."""

    def __init__(self, rr: RepoRun, work: WorkBranch, rounds: PullRequestRounds | None):
        self.rr, self.work, self.rounds = rr, work, rounds
        self.pushed: str | None = None

    def land(self, exact: bool) -> Landing:
        if exact and self.rounds is not None:
            return self.rounds.landing()
        mirror, branch, base = self.rr.repo.mirror, self.rr.branch, self.rr.base
        where = f"on [repos.{self.rr.repo.name}] ({self.rr.repo.config.url})"
        try:
            tip = self._tip()
            have = mirror.fetch()
            self.pushed = (
                mirror.push(self.work.path, branch, expect=have.get(branch)) if have.get(branch) != tip else tip
            )
            if not exact or self.rr.cfg.land in ("branch", "pull_request"):
                landed = "branch" if exact else "not landed"
                return Landing(branch, False, landed, tip, f"The work is on branch `{branch}` {where} ({tip[:12]}).")
            return self._merge(tip, have.get(base), where)
        except (MpEngineError, OSError) as e:  # refused, moved, unreachable: the work stays on the run's branch
            return Landing(branch, False, "not landed", None, f"The work could not be pushed {where}: {e}")

    def _tip(self) -> str:
        if self.work.leftovers():
            self.work.commit(f"{self.work.mp_id}: {LEFTOVERS}")
        return self.work._git("rev-parse", "HEAD", cwd=self.work.path).out.strip()

    def _merge(self, tip: str, base_tip: str | None, where: str) -> Landing:
        """`land = "merge"`: the base fast-forwarded to the work, or a merge commit pushed."""
        mirror, branch, base = self.rr.repo.mirror, self.rr.branch, self.rr.base
        git = self.work._git
        if base_tip and git("merge-base", "--is-ancestor", base_tip, tip, cwd=self.work.path, check=False).ok:
            mirror.push(self.work.path, base, expect=base_tip)
            return Landing(branch, True, "fast-forward", tip, f"Landed: `{base}` fast-forwarded to `{branch}` {where}.")
        merged = git(
            *self.work.identity(),
            "merge",
            "--no-ff",
            "--no-edit",
            "-m",
            f"{self.rr.mp_id}: merge {branch}",
            TRACKING + base,
            cwd=self.work.path,
            check=False,
        )
        if not merged.ok:
            git("merge", "--abort", cwd=self.work.path, check=False)
            return Landing(
                branch,
                False,
                "not landed",
                tip,
                f"`{branch}` does not merge into `{base}` {where}; it is on branch `{branch}` for a person.",
            )
        mirror.push(self.work.path, branch, expect=tip)
        top = mirror.push(self.work.path, base, expect=base_tip)
        return Landing(branch, True, "merge", top, f"Landed: `{branch}` merged into `{base}` {where}.")

    def result(self) -> dict[str, Any]:
        if self.rounds is not None:
            return self.rounds.result()
        return {"repo": self.rr.repo.name, "head": self.rr.branch, "base": self.rr.base, "head_sha": self.pushed}
