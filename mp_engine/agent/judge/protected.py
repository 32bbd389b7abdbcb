"""The files that judge the work, protected from the agent (issue #42): what the checks
run or collect (checkfiles.py), CI configuration, and `[agent] protected_paths`, less what
the MP's `Allow-Changes:` globs let it change.

`Protected.at` reads the base commit once (one `git ls-tree`): each protected file with
its blob id, or its absence where none may appear (a conftest.py above the tests, a CI
file), and the directories no file may be added to (`.github/workflows/`, a glob's
directory). `touched` is the per-iteration look, without git: a `stat` per protected
file (its content hashed only when size, mtime or inode moved, and compared with the
base's blob), a listing of the watched directories. `restore` puts the base's copy back
(one `git checkout`), so the checks always run on it.

Globs: `*` and `?` within a path component, `**` across them; a glob without a `/`
matches a file's name in any directory; one ending in `/` everything under it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mp_engine.agent.judge.checkfiles import judged_by
from mp_engine.core.gitcmd import git
from mp_engine.inbox.mpfile import MicroProject

# CI configuration: a workflow the agent rewrites would judge the pull request.
CI_DIRS = (".github/workflows", ".circleci", ".buildkite", ".gitlab/ci")
RACY_NS = 1_000_000_000  # a file or directory changed this recently may change again within its mtime's tick
CI_FILES = (".gitlab-ci.yml", ".travis.yml", "azure-pipelines.yml", "Jenkinsfile", "bitbucket-pipelines.yml")


def glob_re(glob: str) -> re.Pattern[str]:
    """A glob as a regex over repository-relative paths (module docstring)."""
    g = glob.strip().removeprefix("./")
    if g.endswith("/"):
        g += "**"
    if "/" not in g:
        g = "**/" + g
    out, i = "", 0
    while i < len(g):
        if g.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif g.startswith("**", i):
            out, i = out + ".*", i + 2
        elif g[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif g[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(g[i]), i + 1
    return re.compile(out + r"\Z")


def static_dir(glob: str) -> str:
    """The directory a glob's matches all lie under ("" for the repository's root)."""
    g = glob.strip().removeprefix("./")
    if "/" not in g.rstrip("/"):
        return "" if not g.endswith("/") else g.rstrip("/")
    head = []
    for part in g.split("/")[:-1]:
        if any(ch in part for ch in "*?["):
            break
        head.append(part)
    return "/".join(head)


def blob_id(path: Path, oid_len: int) -> str:
    """The git blob id of a file's bytes (SHA-1, or SHA-256 in a SHA-256 repository)."""
    data = path.read_bytes()
    h = hashlib.sha1() if oid_len == 40 else hashlib.sha256()  # noqa: S324 - git's object id, not security
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


@dataclass
class Protected:
    root: Path
    base: str  # the commit the files are restored from
    files: dict[str, str]  # path -> its blob id at base ("": absent there, and must stay so)
    watched: dict[str, re.Pattern[str] | None]  # directory -> what may not be added in it (None: anything)
    known: frozenset[str]  # every file of the base
    allowed: tuple[re.Pattern[str], ...] = ()
    filters: bool = False  # .gitattributes or core.autocrlf: the worktree's bytes may differ from the blob's
    _seen: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # path -> (size, mtime_ns, ino) found equal
    _dirs: dict[str, tuple[int, list[str]]] = field(
        default_factory=dict
    )  # directory -> (mtime_ns, subdirs) found clean

    def __post_init__(self) -> None:
        self._root = str(self.root)
        self._abs = {p: os.path.join(self._root, p) for p in self.files}  # joined once, looked at every iteration
        w = self.watched  # a directory inside another watched for the same (or anything) is walked there
        self._top = {
            d: p for d, p in w.items() if not any(o != d and d.startswith(o + "/") and w[o] in (None, p) for o in w)
        }

    @classmethod
    def at(cls, root: Path, base: str, mp: MicroProject, globs: Iterable[str] = ()) -> Protected:
        """The protected set of `mp`'s work in `root`, as of commit `base` (module docstring)."""
        tree: dict[str, str] = {}
        out = git(root, "ls-tree", "-r", "-z", "--full-tree", base).out
        for entry in out.split("\0"):
            if "\t" in entry:
                meta, path = entry.split("\t", 1)
                tree[path] = meta.split()[2]
        globs = tuple(globs)
        allowed = tuple(glob_re(g) for g in mp.headers.get("Allow-Changes", ()))
        judged = judged_by(mp.checks, tree)
        # A conftest.py may not appear above a protected test, nor a CI file where there was none.
        tests = [p.split("/") for p in judged if p.endswith(".py")]
        must_stay = {"/".join([*t[:i], "conftest.py"]) for t in tests for i in range(len(t))} | set(CI_FILES)
        patterns = [glob_re(g) for g in globs]
        chosen = judged | {p for p in tree if any(p.startswith(d + "/") for d in CI_DIRS)}
        chosen |= {p for p in tree if any(r.match(p) for r in patterns)}
        files = {p: tree.get(p, "") for p in chosen | must_stay}
        watched: dict[str, re.Pattern[str] | None] = {d: None for d in CI_DIRS}
        for g, r in zip(globs, patterns, strict=True):
            watched[static_dir(g)] = r
        for test_dir in {p.rsplit("/", 1)[0] for p in judged if "/" in p}:
            watched.setdefault(test_dir, re.compile(r"(?:^|/)conftest\.py\Z"))
        files = {p: oid for p, oid in files.items() if not any(a.match(p) for a in allowed)}
        # Bytes that differ from the blob may still be equal as git stores them (line endings,
        # clean filters): git is asked then, only where the repository has such settings.
        filters = any(p.rsplit("/", 1)[-1] == ".gitattributes" for p in tree) or bool(
            git(root, "config", "--get", "core.autocrlf", check=False).out.strip()
        )
        return cls(Path(root), base, files, watched, frozenset(tree), allowed, filters)

    def __len__(self) -> int:
        return len(self.files)

    def touched(self) -> list[str]:
        """The protected paths the workspace no longer has as the base had them."""
        out = [p for p, oid in self.files.items() if self._changed(p, oid)]
        for d, pattern in self._top.items():
            out += [p for p in self._added(d) if p not in self.files and _hit(p, pattern)]
        return sorted({p for p in out if not any(a.match(p) for a in self.allowed)})

    def _changed(self, rel: str, oid: str) -> bool:
        """One `lstat`; the content hashed only when size, mtime or inode moved (a file whose
        mtime is within a second of the look is hashed every time: git's "racy" rule)."""
        path = self._abs[rel]
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return oid != ""
        if not oid or not stat.S_ISREG(st.st_mode):
            return True
        sig = (st.st_size, st.st_mtime_ns, st.st_ino)
        if self._seen.get(rel) == sig:
            return False
        same = blob_id(Path(path), len(oid)) == oid or (self.filters and self._filtered_equal(rel, oid))
        if same and time.time_ns() - st.st_mtime_ns > RACY_NS:
            self._seen[rel] = sig
        return not same

    def _filtered_equal(self, rel: str, oid: str) -> bool:
        """Equal as git stores it (line-ending or clean filters): asked of git, only when the bytes differ."""
        return git(self.root, "hash-object", "--", rel, check=False).out.strip() == oid

    def _added(self, d: str) -> list[str]:
        """The files under directory `d` ("": the root's own files, not below) the base did
        not have. A directory whose mtime has not moved since it was listed clean is not
        listed again (a file added or removed in it moves its mtime); its subdirectories
        are still looked at."""
        found: list[str] = []
        stack = [d]
        while stack:
            rel = stack.pop()
            top = os.path.join(self._root, rel) if rel else self._root
            try:
                mtime = os.stat(top).st_mtime_ns
            except (FileNotFoundError, NotADirectoryError):
                continue
            if self._dirs.get(rel, (None, []))[0] == mtime:
                stack += self._dirs[rel][1] if rel else []
                continue
            subdirs, new = [], []
            for e in os.scandir(top):
                child = f"{rel}/{e.name}" if rel else e.name
                if e.is_dir(follow_symlinks=False):
                    if e.name != ".git":
                        subdirs.append(child)
                elif child not in self.known:
                    new.append(child)
            found += new
            if not new and time.time_ns() - mtime > RACY_NS:
                self._dirs[rel] = (mtime, subdirs)
            stack += subdirs if rel else []
        return found

    def restore(self, paths: Iterable[str]) -> None:
        """The base's copy of each path back in the workspace (and its index); a path the
        base did not have is removed."""
        paths = sorted(paths)
        present = [p for p in paths if self.files.get(p) or p in self.known]
        if present:
            git(self.root, "checkout", self.base, "--", *present)
        for p in paths:
            if p not in present:
                git(self.root, "rm", "-q", "--cached", "--ignore-unmatch", "--", p)
                (self.root / p).unlink(missing_ok=True)
        self._seen.clear()
        self._dirs.clear()


def _hit(path: str, pattern: re.Pattern[str] | None) -> bool:
    return pattern is None or pattern.match(path) is not None
