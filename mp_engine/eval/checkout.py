"""The repositories of an eval, through the one git runner: a mirror per repository, and fresh
copies of it at a task's base commit that hold that commit's history and nothing after it
(an agent could otherwise find the fix with `git log --all`: the SWE-bench harness had that
leak too). The agent's patch is read from its work branch, and patches are applied here."""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path

from mp_engine.core.gitcmd import GitResult, git

TIMEOUT = 1800.0  # a first clone of a large repository
IDENTITY = ("-c", "user.name=mp-engine eval", "-c", "user.email=eval@mp-engine.invalid")
# `git diff` of what is work: every path but the engine's own files (core/workspace.py NOT_WORK).
MAGIC = {"GIT_LITERAL_PATHSPECS": "0"}
PATCH_PATH_RE = re.compile(r'^(?:---|\+\+\+) (?:"?[ab]/)(.+?)"?\t?$', re.M)
_MIRRORS: dict[Path, threading.Lock] = {}
_MIRRORS_LOCK = threading.Lock()


class CheckoutError(Exception):
    """A repository or a commit cannot be had: the environment's fault, never the agent's."""


def _run(cwd: Path, *args: str, what: str = "", input: str | None = None) -> GitResult[str]:
    r = git(cwd, *args, check=False, timeout=TIMEOUT, input=input)
    if not r.ok:
        raise CheckoutError(f"{what or 'git ' + args[0]} failed (exit {r.code}): {(r.err or r.out).strip()[-800:]}")
    return r


def mirror(url: str, path: Path, commit: str) -> str:
    """A bare mirror of `url` at `path` holding `commit` (cloned once, fetched when it lacks the
    commit); returns the commit's full id. Clones go to a temporary name first, so an
    interrupted one is never taken as done."""
    with _MIRRORS_LOCK:
        lock = _MIRRORS.setdefault(path, threading.Lock())
    with lock:  # one clone per repository, whatever number of its tasks start at once
        if not path.exists():
            tmp = path.with_name(path.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.parent.mkdir(parents=True, exist_ok=True)
            _run(tmp.parent, "clone", "--bare", "--quiet", url, str(tmp), what=f"cloning {url}")
            os.replace(tmp, path)
        if not has_commit(path, commit):
            _run(path, "fetch", "--quiet", "origin", commit, what=f"fetching {commit} from {url}")
            if not has_commit(path, commit):
                raise CheckoutError(f"{url} has no commit {commit}")
        return _run(path, "rev-parse", "--verify", f"{commit}^{{commit}}").out.strip()


def has_commit(repo: Path, commit: str) -> bool:
    return git(repo, "rev-parse", "-q", "--verify", f"{commit}^{{commit}}", check=False).ok


def fresh_copy(source: Path, commit: str, dest: Path, branch: str = "main") -> str:
    """A new repository at `dest` on `branch` at `commit`, fetched from `source`: its history up
    to the commit, no remote, no later object. Returns the full commit id."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    _run(dest, "init", "--quiet", "-b", branch)
    _run(dest, "fetch", "--quiet", "--no-tags", str(source), commit, what=f"fetching {commit} into {dest}")
    _run(dest, "update-ref", "--stdin", input=f"update refs/heads/{branch} FETCH_HEAD\n")
    _run(dest, "reset", "--quiet", "--hard")
    return _run(dest, "rev-parse", "HEAD").out.strip()


def work_patch(repo: Path, base: str, tip: str | None) -> str:
    """What the agent changed from `base` to its work branch's `tip`, the engine's own files
    left out (they are never the agent's work), binary files included."""
    if not tip:
        return ""
    from mp_engine.core.workspace import WORK_PATHSPEC

    r = git(repo, "diff", "--binary", "--no-color", "--no-ext-diff", base, tip, "--", *WORK_PATHSPEC, env=MAGIC)
    return r.out


def apply(repo: Path, patch: str, *, what: str, reverse: bool = False) -> None:
    """Apply `patch` to the working tree of `repo` (nothing to do for an empty one)."""
    if not patch.strip():
        return
    args = ["apply", "--binary", "--whitespace=nowarn", *(["-R"] if reverse else []), "-"]
    _run(repo, *args, what=what, input=patch if patch.endswith("\n") else patch + "\n")


def patch_paths(patch: str) -> list[str]:
    """The files a patch touches (both sides of a rename), in order, without duplicates."""
    found = [p for p in PATCH_PATH_RE.findall(patch) if p != "/dev/null"]
    return list(dict.fromkeys(found))


def restore(repo: Path, base: str, paths: list[str]) -> None:
    """`paths` as they are at `base`: what the agent did to the judging tests' files is undone
    (a file the base does not have is removed), so writing them cannot help it."""
    if not paths:
        return
    listed = git(repo, "ls-tree", "-r", "--name-only", base, "--", *paths).out.split("\n")
    at_base = [p for p in paths if p in set(listed)]
    for p in paths:
        if p not in at_base:
            target = repo / p
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
    if at_base:
        _run(repo, "checkout", "--quiet", base, "--", *at_base)


def commit_all(repo: Path, message: str, *, when: str | None = None) -> str:
    """Commit everything in `repo` (a demo or scratch repository), with a fixed identity and,
    given `when`, fixed dates: the same files make the same commit id everywhere."""
    env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
    git(repo, "add", "-A")
    git(repo, *IDENTITY, "commit", "--quiet", "--no-verify", "-m", message, env=env)
    return git(repo, "rev-parse", "HEAD").out.strip()
