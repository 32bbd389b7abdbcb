"""A configured repository on this host: one bare mirror, and a worktree per run or task.

    SYSTEM/.engine/repos/NAME/mirror.git     the mirror: the remote's branches as
                                             refs/remotes/origin/*, the work branches
    SYSTEM/.engine/repos/NAME/work/KEY/      a worktree per run (per task, when parallel)
    SYSTEM/.engine/repos/NAME/config.accepted   the mirror's config as the engine made it

Every git call goes through `gitcmd.git` (the one runner, its timeout and its guard): the
mirror's config is guarded like the workspace's (gitcmd.protect_config), so a step that
edits it stops the engine's git there instead of steering it. The remote is always named
by its URL from `[repos.NAME]`, never by a remote in the mirror's config; credentials
come from credentials.git_auth, for the calls that reach the remote only.

A push is a lease: `--force-with-lease` with the tip the engine last pushed (or "must not
exist" for a new branch), so a person's push onto the work branch in between is noticed
(`BranchMoved`) and never overwritten (issue #41).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from mp_engine.config.repos import RepoConfig
from mp_engine.core import gitcmd
from mp_engine.core.errors import BranchMissing, BranchMoved, CredentialsRefused
from mp_engine.forge.credentials import GitAuth, Token, git_auth

TRACKING = "refs/remotes/origin/"
# What git says when the remote wants other credentials (no prompt: GIT_TERMINAL_PROMPT=0).
REFUSED_RE = re.compile(
    r"could not read (Username|Password)|Authentication failed|returned error: 40[13]|Permission to .* denied|"
    r"Invalid username or password|Write access to repository not granted",
    re.I,
)


class RepoMirror:
    """One `[repos.NAME]` on this host. `home`: SYSTEM/.engine/repos."""

    def __init__(self, home: Path, name: str, repo: RepoConfig, token: Token | None, *, timeout: float = 300.0):
        self.name, self.url, self.timeout = name, repo.url, timeout
        self.home = Path(home) / name
        self.git_dir = self.home / "mirror.git"
        self._auth: GitAuth = git_auth(repo.url, token)

    def __repr__(self) -> str:
        return f"<RepoMirror {self.name} {self.url}>"

    def _git(self, cwd: Path, *args: str, remote: bool = False, check: bool = True, input: str | None = None):
        auth = self._auth if remote else GitAuth()
        result = gitcmd.git(
            cwd, *auth.args, *args, env=dict(auth.env or {}), check=False, timeout=self.timeout, input=input
        )
        if check and not result.ok:
            raise self._refused(result) if remote and REFUSED_RE.search(result.err) else gitcmd.failure(result)
        return result

    def _refused(self, result: gitcmd.GitResult[str]) -> CredentialsRefused:
        held = self._auth.env is not None
        fix = (
            f"the token in the variable [repos.{self.name}] token_env names must be valid and allowed Contents "
            "read and write on this repository (docs/PULL_REQUESTS.md)"
            if held
            else "for an ssh URL, the engine's ssh key must be allowed to push there; for https, set "
            f"[repos.{self.name}] token_env"
        )
        return CredentialsRefused(
            f"{self.url} refused the engine's credentials: {result.err.strip()[-300:]}. Fix: {fix}."
        )

    def ensure(self) -> None:
        """Make the mirror when it is missing, and guard its config from now on."""
        if not (self.git_dir / "HEAD").exists():
            self.home.mkdir(parents=True, exist_ok=True)
            partial = self.home / "mirror.git.partial"
            shutil.rmtree(partial, ignore_errors=True)  # an earlier attempt killed half-way
            self._git(self.home, "init", "--bare", "--quiet", str(partial))
            partial.rename(self.git_dir)
        gitcmd.protect_config(self.home, self.home / "config.accepted", self.git_dir / "config")

    def fetch(self) -> dict[str, str]:
        """Bring the remote's branches into the mirror; {branch: sha} of what it has."""
        self.ensure()
        self._git(
            self.git_dir,
            "fetch",
            "--quiet",
            "--prune",
            "--no-tags",
            self.url,
            f"+refs/heads/*:{TRACKING}*",
            remote=True,
        )
        return self.branches()

    def branches(self) -> dict[str, str]:
        """{branch: sha} as the last fetch or push left them (no network)."""
        out = self._git(self.git_dir, "for-each-ref", "--format=%(objectname) %(refname)", TRACKING).out
        return {ref.removeprefix(TRACKING): sha for sha, _, ref in (ln.partition(" ") for ln in out.splitlines())}

    def start_point(self, branch: str, base: str) -> str:
        """Where a run's work starts: the work branch as it is on the remote when it is
        there (a restarted run, the next round on one pull request), else `base`."""
        have = self.branches()
        if branch in have:
            return TRACKING + branch
        if base not in have:
            raise BranchMissing(
                f"[repos.{self.name}] has no branch {base!r} on {self.url} (its branches: "
                f"{', '.join(sorted(have)) or 'none'}). Fix: set [repos.{self.name}] base, or the MP's `Base:`, "
                "to a branch that exists."
            )
        return TRACKING + base

    def worktree(self, key: str, branch: str, start: str) -> Path:
        """The worktree `work/KEY` on `branch`, made from `start` (a ref) when it is not
        there; a worktree that is there (a restart) is used as it is."""
        path = self.home / "work" / key
        self._git(self.git_dir, "worktree", "prune")
        if (path / ".git").is_file():
            return path
        shutil.rmtree(path, ignore_errors=True)  # a worktree git forgot: made again
        path.parent.mkdir(parents=True, exist_ok=True)
        self._git(self.git_dir, "worktree", "add", "--quiet", "--force", "-B", branch, str(path), start)
        return path

    def remove(self, key: str) -> None:
        """Drop the worktree `work/KEY` (its branch stays in the mirror)."""
        path = self.home / "work" / key
        self._git(self.git_dir, "worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(path, ignore_errors=True)
        self._git(self.git_dir, "worktree", "prune", check=False)

    def push(self, worktree: Path, branch: str, expect: str | None) -> str:
        """Push the worktree's HEAD to `branch` on the remote, if the remote's `branch` is
        still `expect` (None: it must not exist yet). Returns the sha pushed. A remote that
        moved raises `BranchMoved`, naming both tips; nothing is overwritten."""
        sha = self._git(worktree, "rev-parse", "HEAD").out.strip()
        ref = f"refs/heads/{branch}"
        lease = f"--force-with-lease={ref}:{expect or ''}"
        result = self._git(worktree, "push", "--porcelain", lease, self.url, f"{sha}:{ref}", remote=True, check=False)
        status = next((ln for ln in result.out.splitlines() if ln.split("\t")[1:2] == [f"{sha}:{ref}"]), "")
        if result.ok and status[:1] in (" ", "+", "*", "="):
            self._git(worktree, "update-ref", "--stdin", input=f"update {TRACKING}{branch} {sha}\n")
            return sha
        if "stale info" in status or "fetch first" in status or "already exists" in status:
            raise BranchMoved(
                f"{branch} on {self.url} is not where the engine left it ({expect or 'absent'}): someone else "
                "pushed to it. The engine stops this run rather than overwrite their work; to let it go on, "
                f"push your work elsewhere or reset {branch} to {expect or 'nothing'}, then send the MP again."
            )
        if not result.ok and REFUSED_RE.search(result.err):
            raise self._refused(result)
        raise (
            gitcmd.failure(result) if not result.ok else gitcmd.GitFailed(result, f"`git push` to {self.url}: {status}")
        )
