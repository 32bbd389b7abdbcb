"""Integration, one task at a time (issue #29): an accepted task's one commit is brought
onto `mp/<MP-id>` in the integration worktree (`git cherry-pick`), and the checks of
that task and of every task already integrated run on the result. Only when they pass
is the task integrated; a conflict, or a check that breaks only on the combined work,
undoes the pick (`git reset --hard` to the tip before it) and goes back to the task.

Crash safety: the pick and the checks happen before the integration's record exists.
A restart finds the worktree as a crash left it: a pick in progress is aborted, and a
tip that is the pick of a task not yet recorded as integrated is undone (`recover`), so
the integration runs again from the start; a task is never integrated twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from mp_engine.agent.evidence import IterationEvidence
from mp_engine.agent.judge.checks import Checker
from mp_engine.agent.run.workbranch import WorkBranch
from mp_engine.agent.state.model import TaskState
from mp_engine.core.clock import now_iso
from mp_engine.core.gitcmd import NO_AUTO_GC, GitResult, git

TIMEOUT = 120.0
DIFF_CAP = 16 * 1024  # the conflict shown in the task's next prompt


class CheckResult(TypedDict):
    """One check run on the combined work."""

    id: str
    step: str
    ok: bool
    exit_code: int | None


@dataclass
class Integration:
    outcome: str  # integrated | conflict | broke | interrupted
    base: str  # the tip of mp/<MP-id> before
    commit: str | None = None  # the task's commit on mp/<MP-id> (integrated)
    detail: str = ""
    conflict: list[str] = field(default_factory=list)  # the files in conflict
    diff: str = ""  # the conflict as git shows it (markers included)
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def failing(self) -> list[str]:
        return [c["id"] for c in self.checks if not c["ok"]]

    def record(
        self, ev: IterationEvidence, task: TaskState, mt_index: int, task_commit: str, *, level: int, seq: int
    ) -> dict[str, Any]:
        """The integration's record (state/tasks.py takes it) with its
        evidence in `ev`. A failed one reads like a failed iteration of the task: its next
        prompt shows the conflict or the checks that broke."""
        ok = self.outcome == "integrated"
        if self.diff:
            ev.write("conflict.diff", self.diff)
        rec = {
            "ok": ok,
            "mt": task.mt_id,
            "mt_index": mt_index,
            "outcome": self.outcome,
            "attempt": task.integration_failures + 1,
            "base": self.base,
            "task_commit": task_commit,
            "commit": self.commit,
            "detail": self.detail,
            "conflict": self.conflict,
            "checks": self.checks,
            "passed": [c["id"] for c in self.checks if c["ok"]],
            "failing": self.failing,
            "residual": len(self.failing) or (0 if ok else 1),
            "call": {"kind": "integration", "detail": self.detail},
            "claimed": True,
            "gate": False,
            "iteration": task.iterations,
            "level": level,
            "evidence": ev.rel,
            "at": now_iso(),
            "seq": seq,
        }
        ev.write_json("record.json", rec)
        ev.write_manifest()
        rec["integration"] = {"outcome": self.outcome, "detail": self.detail, "diff": self.diff}
        return rec


class Integrator:
    def __init__(self, work: WorkBranch, checker: Checker):
        self.work = work
        self.checker = checker  # runs in the integration worktree (work.path)

    def _git(self, *args: str, check: bool = True) -> GitResult[str]:
        return git(self.work.path, *args, check=check, timeout=TIMEOUT)

    def tip(self) -> str:
        return self._git("rev-parse", "HEAD").out.strip()

    def recover(self, pending: dict[str, str]) -> str | None:
        """Undo what an interrupted integration left: a pick in progress, and a tip that
        picks a task not yet integrated (`pending`: {commit subject: MT id} of the tasks
        waiting for integration). Returns the MT id whose pick was undone, if any."""
        self._git("cherry-pick", "--abort", check=False)
        self._git("reset", "--quiet", "--hard", "HEAD")
        subject = self._git("log", "-1", "--format=%s").out.strip()
        mt_id = pending.get(subject)
        if mt_id is not None:
            self._git("reset", "--quiet", "--hard", "HEAD^")
        return mt_id

    def integrate(self, task_commit: str, checks: list[int], prefix: str) -> Integration:
        """Pick `task_commit` onto the tip and run `checks` (indices into the MP's checks)
        there as steps `<prefix>_check-NNN`."""
        self._git("clean", "-q", "-fd")  # what earlier checks left (ignored files stay)
        base = self.tip()
        picked = self._git(
            *self.work.identity(),
            *NO_AUTO_GC,
            "cherry-pick",
            "--allow-empty",
            "--keep-redundant-commits",
            task_commit,
            check=False,
        )
        if not picked.ok:
            files = self._git("diff", "--name-only", "--diff-filter=U", check=False).out.split()
            diff = self._git("diff", check=False).out[:DIFF_CAP]
            self._git("cherry-pick", "--abort", check=False)
            self._git("reset", "--quiet", "--hard", base)
            why = (picked.err or picked.out).strip().splitlines()[-1:] or ["(git said nothing)"]
            detail = f"conflict in {', '.join(files)}" if files else f"the pick failed: {why[0]}"
            return Integration("conflict", base, detail=detail, conflict=files, diff=diff)
        commit = self.tip()
        ran = self.checker.run(checks, prefix)
        if ran is None:  # a stop or a cancel: undone, it runs again (or never)
            self._git("reset", "--quiet", "--hard", base)
            return Integration("interrupted", base, detail="stopped during the integration's checks")
        results: list[CheckResult] = [
            {"id": c.check_id, "step": c.step_id, "ok": ok, "exit_code": code} for c, ok, code in ran
        ]
        failing = [r["id"] for r in results if not r["ok"]]
        if failing:
            self._git("reset", "--quiet", "--hard", base)
            detail = f"{', '.join(failing)} failed on the combined work"
            return Integration("broke", base, detail=detail, checks=results)
        return Integration("integrated", base, commit=commit, checks=results)
