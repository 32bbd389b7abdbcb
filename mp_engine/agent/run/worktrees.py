"""Parallel tasks' worktrees (issue #29): each running micro-task works in its own git
worktree, `SYSTEM/.engine/work/<run>/<MT-id>/`, on branch `mp-task/<MP-id>/<MT-id>`,
made from the tip of `mp/<MP-id>` when the task starts (or is refreshed after its work
did not integrate). Its agent, its checks and its evidence run there.

The branch cannot be `mp/<MP-id>/<MT-id>`: git stores a branch as a file under
`refs/heads/`, so `mp/MP-2.1` (the MP's work branch) and `mp/MP-2.1/MT-002` cannot both
exist. The task branches are the engine's scratch: removed with the worktrees at the end
of the run; each accepted task's one commit lives on `mp/<MP-id>` (integrator.py).
"""

from __future__ import annotations

from pathlib import Path

from mp_engine.agent.run.workbranch import MAGIC, WorkBranch
from mp_engine.core.gitcmd import NO_AUTO_GC, GitResult, git
from mp_engine.core.workspace import WORK_PATHSPEC

TIMEOUT = 120.0


class TaskWorktrees:
    def __init__(self, work: WorkBranch):
        self.work = work
        self.root = work.run_dir
        self._pruned = False

    def _git(self, cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> GitResult[str]:
        return git(cwd, *args, check=check, timeout=TIMEOUT, env=env)

    def path(self, mt_id: str) -> Path:
        return self.root / mt_id

    def branch(self, mt_id: str) -> str:
        return f"mp-task/{self.work.branch.removeprefix('mp/')}/{mt_id}"

    def map_cache(self, mt_id: str) -> Path:
        return self.root / f"{mt_id}.repomap.json"

    def start(self, mt_id: str) -> str:
        """The task's worktree at the tip of `mp/<MP-id>` (a resumed task finds it in
        place, with the work it had); returns the commit it started from."""
        path = self.path(mt_id)
        if not (path / ".git").exists():
            if not self._pruned:  # once per run: what a crash left of removed worktrees
                self._git(self.work.home, "worktree", "prune")
                self._pruned = True
            self._git(
                self.work.home,
                "worktree",
                "add",
                "--quiet",
                "--force",
                "-B",
                self.branch(mt_id),
                str(path),
                self.work.branch,
            )
        return self.head(mt_id)

    def refresh(self, mt_id: str) -> str:
        """Start the task over from the tip of `mp/<MP-id>` (its work there did not
        integrate): tracked files reset, untracked ones removed (ignored ones, caches and
        builds, kept). Returns the new starting commit."""
        path = self.path(mt_id)
        if not (path / ".git").exists():
            return self.start(mt_id)
        self._git(path, "reset", "--quiet", "--hard", self.work.branch)
        self._git(path, "clean", "-q", "-fd")
        return self.head(mt_id)

    def head(self, mt_id: str) -> str:
        return self._git(self.path(mt_id), "rev-parse", "HEAD").out.strip()

    def commit(self, mt_id: str, message: str, trailer: str) -> str:
        """The task's one commit on its branch: everything it changed but the engine's
        files (an empty commit when it changed nothing). After a crash between this and
        the integration, the commit already made is the one."""
        path = self.path(mt_id)
        self._git(path, "add", "-A", "--", *WORK_PATHSPEC, env=MAGIC)
        staged = self._git(path, "diff", "--cached", "--quiet", check=False).code != 0
        subject = self._git(path, "log", "-1", "--format=%s", check=False).out.strip()
        if not staged and subject == message:
            return self.head(mt_id)
        full = f"{message}\n\n{trailer}"
        self._git(path, *self.work.identity(), *NO_AUTO_GC, "commit", "-q", "--no-verify", "--allow-empty", "-m", full)
        return self.head(mt_id)
