"""A task's work as commits on the work remote, both ways.

The engine sends a task's worktree as it is (`snapshot`, then `push`) to
`mp-task/<MP-id>/<MT-id>`; the worker works on that exact commit and pushes its own on
top (`commit_work`, `push`); the engine fetches it (`fetch`) and lays its files into the
task's worktree without moving the task's branch (`adopt`), so the worktree looks as if
the agent had worked there: the integration (integrator.py) commits it as the task's
one commit. Only the work travels: the engine's files (SYSTEM/, the inbox, the state
and the configuration, `workspace.WORK_PATHSPEC`) stay as the branch has them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mp_engine.core.gitcmd import NO_AUTO_GC, GitFailed, GitResult, git
from mp_engine.core.workspace import WORK_PATHSPEC

MAGIC = {"GIT_LITERAL_PATHSPECS": "0"}  # the :(exclude) pathspecs need the magic
IDENTITY = ("-c", "user.name=mp-engine", "-c", "user.email=mp-engine@localhost")
TIMEOUT = 300.0


def _git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> GitResult[str]:
    return git(cwd, *args, check=check, timeout=TIMEOUT, env=env)


def snapshot(worktree: Path, message: str) -> str:
    """A commit of the worktree's work on top of its HEAD, made without touching HEAD or
    the index (a private index); HEAD itself when nothing differs."""
    head = _git(worktree, "rev-parse", "HEAD").out.strip()
    fd, index = tempfile.mkstemp(prefix="mp-engine-index-")
    os.close(fd)
    try:
        env = {**MAGIC, "GIT_INDEX_FILE": index}
        _git(worktree, "read-tree", "HEAD", env=env)
        _git(worktree, "add", "-A", "--", *WORK_PATHSPEC, env=env)
        tree = _git(worktree, "write-tree", env=env).out.strip()
    finally:
        os.unlink(index)
    if tree == _git(worktree, "rev-parse", "HEAD^{tree}").out.strip():
        return head
    return _git(worktree, *IDENTITY, "commit-tree", tree, "-p", head, "-m", message).out.strip()


def commit_work(worktree: Path, message: str) -> str:
    """The worker's side: commit what the attempt changed (the work, not the engine's
    files) on the checked-out commit; that commit when nothing changed."""
    _git(worktree, "add", "-A", "--", *WORK_PATHSPEC, env=MAGIC)
    if _git(worktree, "diff", "--cached", "--quiet", check=False).code != 0:
        _git(worktree, *IDENTITY, *NO_AUTO_GC, "commit", "-q", "--no-verify", "-m", message)
    return _git(worktree, "rev-parse", "HEAD").out.strip()


def push(cwd: Path, remote: str, commit: str, branch: str) -> None:
    """`commit` as `branch` on the remote (forced: the branch is the attempt's transport)."""
    _git(cwd, "push", "--quiet", "--force", remote, f"{commit}:refs/heads/{branch}")


def delete(cwd: Path, remote: str, branch: str) -> None:
    _git(cwd, "push", "--quiet", remote, "--delete", f"refs/heads/{branch}", check=False)


def has(cwd: Path, commit: str) -> bool:
    return _git(cwd, "cat-file", "-e", f"{commit}^{{commit}}", check=False).ok


def fetch(cwd: Path, remote: str, branch: str, commit: str, local_ref: str) -> None:
    """Make `commit` present here: fetch `branch` (where it was pushed) into `local_ref`,
    and `commit` itself if the branch has moved on since."""
    if has(cwd, commit):
        return
    _git(cwd, "fetch", "--quiet", "--no-tags", remote, f"+refs/heads/{branch}:{local_ref}", check=False)
    if has(cwd, commit):
        return
    try:
        _git(cwd, "fetch", "--quiet", "--no-tags", remote, commit)
    except GitFailed as e:
        raise GitFailed(e.result, f"commit {commit[:12]} is not on {remote} ({branch}): {e}") from e
    _git(cwd, "update-ref", local_ref, commit)


def adopt(worktree: Path, commit: str) -> None:
    """The worktree's files become `commit`'s (work paths only; untracked work that the
    commit does not have goes); HEAD and its branch stay where they are."""
    _git(worktree, "read-tree", "-u", "--reset", commit)
    _git(worktree, "clean", "-q", "-fd", "--", *WORK_PATHSPEC, env=MAGIC)
