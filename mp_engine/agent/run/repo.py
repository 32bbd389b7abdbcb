"""An agent MP's `Repo:` (issue #41): where its branch and worktrees live (the repository's
mirror, not the channel), the pull request's session as the run's ledger recorded it, and
how its work lands there at the end. For `land = "pull_request"`, the rounds between the
tasks' end and the run's are pullrequest.py's.

A push never overwrites a person's: it goes out under a lease (`lease_for`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.agent.run.workbranch import LEFTOVERS, Landing, Where, WorkBranch
from mp_engine.agent.state import ci as ci_state
from mp_engine.agent.state.kinds import RecordKind
from mp_engine.core.errors import MpEngineError
from mp_engine.forge.mirror import TRACKING
from mp_engine.forge.repository import Repository
from mp_engine.forge.session import Happened, PullRequestSession
from mp_engine.forge.session import apply as happen
from mp_engine.record.ledger import Ledger, StepStatus, read_artifact

if TYPE_CHECKING:
    from mp_engine.agent.run.pullrequest import PullRequestRounds

PR_STEP = "pr"  # the kind of a happening's ledger step (`PR-<n>`); CI's verdicts are kind `ci`
SESSION_STEPS = (PR_STEP, RecordKind.CI.value, RecordKind.PR_REVIEW.value)  # what the session replays


def lease_for(work: WorkBranch, there: str | None, tip: str) -> str | None:
    """What the remote's work branch may be for a push of `tip` when the engine has not
    pushed it yet: absent, or a tip the work already contains (the run started from it);
    anything else is a person's (None: the push finds the branch there and stops)."""
    if there is None or there == tip:
        return there
    contained = work._git("merge-base", "--is-ancestor", there, tip, cwd=work.path, check=False).ok
    return there if contained else None


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

    def session(self, ledger: Ledger, steps_dir: Path) -> PullRequestSession:
        """The pull request's session as the ledger recorded it."""
        s = PullRequestSession(self.repo.name, self.branch, self.base)
        for step in ledger.model.steps:
            if step.kind not in SESSION_STEPS or step.status is not StepStatus.COMPLETED:
                continue
            rec = read_artifact(steps_dir, step) or {}
            if step.kind == PR_STEP:
                s = happen(s, rec["happened"], rec)
            elif step.kind == RecordKind.PR_REVIEW.value:
                s = happen(s, Happened.REVIEWING, rec)
            else:
                s = happen(s, Happened.ENDED if rec["step"] == ci_state.ENDED else Happened.CI, rec)
        return s


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
            pushed = self.rounds.session.pushed if self.rounds is not None else None
            if self.rounds is not None:
                self.rounds.unwatch()
            if pushed is not None:  # the pull request keeps the last verified push; nothing goes over it
                kept = "" if tip == pushed else f"; this run's unverified work ({tip[:12]}) is on branch `{branch}` "
                kept += f"in the engine host's mirror of [repos.{self.rr.repo.name}]" if kept else ""
                return Landing(
                    branch,
                    False,
                    "not landed",
                    tip,
                    f"The pull request keeps the engine's last push ({pushed[:12]}){kept}.",
                )
            there = mirror.fetch().get(branch)
            if there != tip:  # under the lease: a tip the work contains, never a person's
                mirror.push(self.work.path, branch, expect=lease_for(self.work, there, tip))
            self.pushed = tip
            if not exact or self.rr.cfg.land in ("branch", "pull_request"):
                landed = "branch" if exact else "not landed"
                return Landing(branch, False, landed, tip, f"The work is on branch `{branch}` {where} ({tip[:12]}).")
            return self._merge(tip, mirror.branches().get(base), where)
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
