"""One open workspace repository: small query functions over the one git runner.

Refs are read through GitPython (`SymbolicReference.dereference_recursive`: loose and
packed refs, no object database, no `git` spawn) and written only by git itself, with
`git update-ref --stdin` (one process and one transaction for several refs). Nothing here
reads or writes git's files directly, so it holds across git versions and ref backends.
"""

from __future__ import annotations

import re
from pathlib import Path

import git as gitpython
from git.refs.symbolic import SymbolicReference

from mp_engine.core.errors import SyncError
from mp_engine.core.gitcmd import GitResult, git

OBJECT_ID_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# HEAD or a full ref name: read through GitPython. Anything else goes to `git rev-parse`.
REF_NAME_RE = re.compile(r"HEAD|refs/(?!.*\.\.)[A-Za-z0-9._/-]+")


class GitSession:
    """The workspace repository, kept open across sync points (opening one reads the config
    and resolves the git directory); `close()` releases GitPython's handles."""

    def __init__(self, root: Path, timeout: float):
        try:
            self.repo = gitpython.Repo(root)
        except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError) as e:
            raise SyncError(
                f"{root} is not a git working tree, but [git] enabled = true. "
                f"Run `mp-engine init --remote URL {root}` to connect it to a remote."
            ) from e
        self.root = Path(root)
        self.timeout = timeout
        self._identity: list[str] | None = None
        self.reftable = (Path(self.repo.common_dir) / "reftable").exists()

    def close(self) -> None:
        self.repo.close()

    # -- running git -------------------------------------------------------------------

    def run(self, *args: str, timeout: float | None = None) -> str:
        """stdout of `git ARGS`; raises `GitFailed` / `RemoteUnreachable` if it fails."""
        return git(self.root, *args, timeout=timeout or self.timeout).out

    def status(self, *args: str, timeout: float | None = None) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `git ARGS`, never raising for a non-zero exit."""
        r = self.result(*args, timeout=timeout)
        return r.code, r.out, r.err

    def result(self, *args: str, timeout: float | None = None) -> GitResult:
        return git(self.root, *args, check=False, timeout=timeout or self.timeout)

    def run_env(self, env: dict[str, str], *args: str, input: str | None = None) -> str:
        """stdout of `git ARGS` with extra environment variables (and stdin)."""
        return git(self.root, *args, timeout=self.timeout, env=env, input=input).out

    # -- refs ---------------------------------------------------------------------------

    def rev(self, name: str) -> str | None:
        """The commit `name` points at, or None when it does not exist."""
        if REF_NAME_RE.fullmatch(name) and not self.reftable:
            try:
                sha = SymbolicReference.dereference_recursive(self.repo, name)
            except (ValueError, OSError, TypeError):
                return None
            return sha if sha and OBJECT_ID_RE.fullmatch(sha) else None
        code, out, _ = self.status("rev-parse", "-q", "--verify", f"{name}^{{commit}}")
        return out.strip() if code == 0 and out.strip() else None

    def update_refs(self, refs: dict[str, str]) -> None:
        """Point refs at commits in one `git update-ref --stdin` transaction. A ref that
        already has the value (the tracking ref `git push` moved) is left alone."""
        for ref, sha in refs.items():
            if not OBJECT_ID_RE.fullmatch(sha) or not REF_NAME_RE.fullmatch(ref) or ref == "HEAD":
                raise SyncError(f"refusing to set {ref!r} to {sha!r}: not a ref and an object id")
        todo = {ref: sha for ref, sha in refs.items() if self.rev(ref) != sha}
        if not todo:
            return
        script = "".join(f"update {ref} {sha}\n" for ref, sha in todo.items())
        git(self.root, "update-ref", "--stdin", input=script, timeout=self.timeout)

    def is_ancestor(self, a: str, b: str) -> bool:
        return self.status("merge-base", "--is-ancestor", a, b)[0] == 0

    def count(self, spec: str) -> int:
        code, out, _ = self.status("rev-list", "--count", spec)
        return int(out.strip()) if code == 0 and out.strip().isdigit() else 0

    def blob(self, commit: str, path: str) -> bytes | None:
        """The exact bytes of `path` at `commit` (a verdict is keyed by their SHA-256)."""
        r = git(self.root, "cat-file", "blob", f"{commit}:{path}", check=False, text=False, timeout=self.timeout)
        return r.out if r.ok else None

    def staged(self) -> list[str]:
        """Paths staged in the index (one `git diff --cached`)."""
        return [p for p in self.run("diff", "--cached", "--name-only", "-z").split("\0") if p]

    def remotes(self) -> dict[str, str]:
        """{name: url} of the configured remotes."""
        return {r.name: r.url for r in self.repo.remotes}

    def identity(self) -> list[str]:
        """`-c user.*` when the repository has no identity, so a commit never fails on it
        (asked of git once per session)."""
        if self._identity is None:
            args: list[str] = []
            if self.status("config", "user.name")[0] != 0:
                args += ["-c", "user.name=mp-engine"]
            if self.status("config", "user.email")[0] != 0:
                args += ["-c", "user.email=mp-engine@localhost"]
            self._identity = args
        return self._identity
