"""The agent's work branch (issue #17): unverified agent work never lands on the channel branch.

An agent MP works in a git worktree of its own, `SYSTEM/.engine/work/<run>/`, on the branch
`mp/<MP-id>`, made from the workspace's HEAD (the channel branch's tip) when the run starts.
The workspace itself stays on the channel branch, where the engine commits only the state
and the result while the agent works. Each accepted micro-task is one commit on the work
branch (`MP-2.1 MT-002: <title>`, with an `Evidence:` trailer naming its evidence).

When the MP ends EXACT, the work lands per `[agent] land`: `merge` (a fast-forward, or a
merge commit when the channel branch moved meanwhile) or `branch` (it stays on
`mp/<MP-id>` for the orchestrator to review and merge). On any other certificate the
channel branch's code is untouched and the result names the branch holding the partial
work; with the git channel on, that branch is pushed.

The engine's own files (`SESSION_STATE.json`, `SYSTEM/`, `mp-engine.toml`,
`Claude_Inbox/`) are never committed on the work branch, whatever the agent did to its
copies of them. A crash leaves the worktree in place; the resumed run works on in it.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mp_engine.core.gitcmd import NO_AUTO_GC, GitResult, git
from mp_engine.core.workspace import WORK_PATHSPEC, Workspace

# `git add -A` of everything but what is not work, in one process (pathspec magic on: the
# runner sets GIT_LITERAL_PATHSPECS=1 for the engine's own named paths).
MAGIC = {"GIT_LITERAL_PATHSPECS": "0"}
TIMEOUT = 120.0
LEFTOVERS = "work not yet committed at the end of the run"


class NoGit(Exception):
    """The workspace cannot give the agent a work branch (no repository, no commit)."""


@dataclass
class Landing:
    branch: str
    landed: bool
    how: str  # fast-forward | merge | branch | not landed
    commit: str | None  # the work branch's tip
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "landed": self.landed, "how": self.how, "commit": self.commit, "note": self.note}


@dataclass(frozen=True)
class Committed:
    """A commit the engine made, with what git said of it at once: its tree, and its
    parent's (None: a root commit). The evidence learns from it what it need not ask."""

    sha: str
    tree: str
    parent: str | None = None
    parent_tree: str | None = None


def branch_name(mp_id: str) -> str:
    return "mp/" + re.sub(r"[^A-Za-z0-9._-]", "_", mp_id).strip(".") or "mp/UNPARSED"


@dataclass(frozen=True)
class Where:
    """Where a run's work branch and worktrees live: the channel's repository (the
    workspace's own, by default), or a configured repository's mirror (`Repo:`, issue #41)."""

    home: Path  # where git keeps the branch: the workspace, or the mirror (a bare repository)
    work_root: Path  # the run's worktrees go under `work_root/<run>/`
    start: str = "HEAD"  # where a new work branch starts
    upstream: str = "HEAD"  # what the branch's task commits are counted from (the channel, or the base)

    @classmethod
    def channel(cls, ws: Workspace) -> Where:
        return cls(ws.root, ws.local_dir / "work")


class WorkBranch:
    def __init__(self, ws: Workspace, mp_id: str, run_id: str, *, parallel: bool = False, where: Where | None = None):
        """`parallel`: tasks run at once, each in a worktree of its own beside this one
        (worktrees.py), so this one (the integrator's) is `work/<run>/integration/`.
        `where`: the channel's repository (default) or a configured repository's mirror."""
        self.ws = ws
        self.mp_id = mp_id
        self.branch = branch_name(mp_id)
        self.parallel = parallel
        self.where = where or Where.channel(ws)
        self.home = self.where.home
        self.run_dir = self.where.work_root / run_id
        self.path = self.run_dir / "integration" if parallel else self.run_dir
        self._id: list[str] | None = None

    def _git(
        self, *args: str, cwd: Path | None = None, check: bool = True, env: dict[str, str] | None = None
    ) -> GitResult[str]:
        return git(cwd or self.home, *args, check=check, timeout=TIMEOUT, env=env)

    def identity(self) -> list[str]:
        """`-c user.*` when the repository has no identity (asked of git once)."""
        if self._id is None:
            self._id = []
            if self._git("config", "user.name", check=False).code != 0:
                self._id += ["-c", "user.name=mp-engine"]
            if self._git("config", "user.email", check=False).code != 0:
                self._id += ["-c", "user.email=mp-engine@localhost"]
        return self._id

    def ensure(self, *, resumed: bool = False) -> Path:
        """The worktree, made on first use from the workspace's HEAD (a resumed run finds
        it in place). A `resumed` run whose worktree is gone (a crash after the end of the
        run removed it, before the result was recorded) gets it back on its branch as it
        is: the branch holds the run's commits, and is never reset then."""
        if (self.path / ".git").exists():
            return self.path
        if self.home == self.ws.root and not (self.ws.root / ".git").exists():
            raise NoGit(f"{self.ws.root} is not a git repository")
        start = self.where.start
        if self._git("rev-parse", "-q", "--verify", f"{start}^{{commit}}", check=False).code != 0:
            raise NoGit(f"the repository in {self.home} has no commit yet")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._git("worktree", "prune")
        exists = self._git("rev-parse", "-q", "--verify", f"refs/heads/{self.branch}", check=False).code == 0
        if resumed and exists:
            self._git("worktree", "add", "--quiet", "--force", str(self.path), self.branch)
        else:
            self._git("worktree", "add", "--quiet", "--force", "-B", self.branch, str(self.path), start)
        return self.path

    def uncommit_leftovers(self) -> bool:
        """An answered run goes on (issue #32): the work its end committed as leftovers is
        uncommitted again (the branch steps back over that commit, the files stay), so the
        task that asked still ends as one commit. True when there was such a commit."""
        if self.parallel:
            return False
        subject = self._git("log", "-1", "--format=%s", cwd=self.path, check=False).out.strip()
        if subject != f"{self.mp_id}: {LEFTOVERS}":
            return False
        self._git("reset", "--soft", "--quiet", "HEAD~1", cwd=self.path)
        return True

    def commit(self, message: str, trailer: str | None = None) -> Committed:
        """Commit everything the agent changed in the worktree but the engine's files;
        an empty commit when it changed nothing (one commit per accepted micro-task).
        Returns the commit, its parent and both trees (one `git log`)."""
        self._git("add", "-A", "--", *WORK_PATHSPEC, cwd=self.path, env=MAGIC)
        full = message + (f"\n\n{trailer}" if trailer else "")
        # Quiet: no summary diffstat to compute (it reads every changed file); no auto-gc or
        # maintenance check on the agent's clock.
        ident = self.identity()
        self._git(*ident, *NO_AUTO_GC, "commit", "-q", "--no-verify", "--allow-empty", "-m", full, cwd=self.path)
        out = self._git("log", "-2", "--first-parent", "--format=%H %T", cwd=self.path).out.split()
        return Committed(out[0], out[1], *out[2:4])

    def task_commits(self) -> dict[str, str]:
        """{MT id: commit} of this run's micro-task commits: those on the work branch that
        the channel branch (or the repository's base) does not have yet. Asked before landing."""
        out = self._git("log", "--format=%H %s", self.branch, "--not", self.where.upstream, "--", check=False).out
        prefix = f"{self.mp_id} "
        found: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, subject = line.partition(" ")
            if subject.startswith(prefix):
                mt = subject[len(prefix) :].split(":", 1)[0]
                found.setdefault(mt, sha)  # newest first: a retried task's last commit
        return found

    def leftovers(self) -> bool:
        """True when the worktree has changes no commit holds yet (outside what is not work)."""
        out = self._git(
            "status", "--porcelain", "--untracked-files=normal", "--", *WORK_PATHSPEC, cwd=self.path, env=MAGIC
        )
        return bool(out.out.strip())

    def land(self, how: str, exact: bool) -> Landing:
        """Bring an EXACT run's work onto the channel branch (`how` = merge), or leave it on
        the work branch and say so."""
        # A parallel run's work is on the branch, task by task; its worktree holds only
        # what the integration's checks left.
        if not self.parallel and self.leftovers():
            self.commit(f"{self.mp_id}: {LEFTOVERS}")
        tip = self._git("rev-parse", self.branch).out.strip()
        if not exact:
            return Landing(
                self.branch,
                False,
                "not landed",
                tip,
                f"The channel branch is untouched; the partial work is on branch `{self.branch}` ({tip[:12]}).",
            )
        if how == "branch":
            return Landing(
                self.branch,
                False,
                "branch",
                tip,
                f"The verified work is on branch `{self.branch}` ({tip[:12]}), for you to review and merge "
                '(`[agent] land = "branch"`).',
            )
        if self._git("merge", "--ff-only", "--quiet", self.branch, check=False).ok:
            return Landing(self.branch, True, "fast-forward", tip, f"Landed: `{self.branch}` fast-forwarded.")
        merged = self._git(
            *self.identity(),
            "merge",
            "--no-ff",
            "--no-edit",
            "--quiet",
            "-m",
            f"{self.mp_id}: merge {self.branch}",
            self.branch,
            check=False,
        )
        if merged.ok:
            return Landing(
                self.branch, True, "merge", tip, f"Landed: `{self.branch}` merged (the channel branch had moved)."
            )
        self._git("merge", "--abort", check=False)
        why = (merged.err or merged.out).strip().splitlines()[-1:] or ["(git said nothing)"]
        return Landing(
            self.branch,
            False,
            "not landed",
            tip,
            f"The verified work could not be merged ({why[0]}); it is on branch `{self.branch}` ({tip[:12]}). "
            f"Merge it by hand: `git merge {self.branch}`.",
        )

    @property
    def map_cache(self) -> Path:
        """The repository map's cache for this worktree: host-local beside it (never pushed
        with the run archive), kept across a restart, dropped with the worktree."""
        return self.path.with_name(f"{self.path.name}.repomap.json")

    def remove(self) -> None:
        """Drop the worktree (a parallel run's task worktrees too) and its map cache (the
        branch stays)."""
        if self.parallel:  # every worktree of the run at once: their directory, then one prune
            shutil.rmtree(self.run_dir, ignore_errors=True)
        else:
            self._git("worktree", "remove", "--force", str(self.path), check=False)
        self._git("worktree", "prune", check=False)
        if self.parallel:  # the tasks' scratch branches (worktrees.py)
            prefix = f"refs/heads/mp-task/{self.branch.removeprefix('mp/')}/"
            refs = self._git("for-each-ref", "--format=%(refname)", prefix, check=False).out.split()
            if refs:
                git(
                    self.home,
                    "update-ref",
                    "--stdin",
                    check=False,
                    timeout=TIMEOUT,
                    input="".join(f"delete {r}\n" for r in refs),
                )
        self.map_cache.unlink(missing_ok=True)
