"""Per-iteration evidence, and the workspace fingerprint that tells progress from none.

Each iteration leaves `agent/<MT>/iter-<NNN>/` in the run archive: the prompt, the agent's
stdout and stderr, its parsed claims, the check results, the diff since the loop started
(`git diff --stat`, which includes commits the agent made itself) and `manifest.json`
with the SHA-256 of every file (the check outputs in `steps/` included).

Progress is a change of the workspace fingerprint: HEAD plus the content hash of every
path git reports as changed or untracked (outside the engine's own files). Only those
paths are hashed, and a file whose size and mtime did not change is not read again.
Without git, the fingerprint covers every file, with the same stat cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from mp_engine.core.atomic import atomic_write, atomic_write_json, sha256_file
from mp_engine.core.gitcmd import git
from mp_engine.core.workspace import CONFIG_FILE, INBOX_DIR, STATE_FILE, SYSTEM_DIR
from mp_engine.core.workspace import WORK_PATHSPEC as PATHSPEC

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
GIT_TIMEOUT = 60.0


@dataclass
class Snapshot:
    head: str | None
    files: dict[str, str]  # path -> sha256 (or "deleted"); git: changed paths only
    untracked: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        h = hashlib.sha256((self.head or "-").encode())
        for path in sorted(self.files):
            h.update(f"\0{path}\t{self.files[path]}".encode())
        return h.hexdigest()


class Worktree:
    """Fingerprints of the workspace; one `git status` per snapshot in a git workspace."""

    def __init__(self, root: Path, *, git_timeout: float = GIT_TIMEOUT):
        self.root = Path(root)
        self.is_git = (self.root / ".git").exists()
        self.git_timeout = git_timeout
        self._cache: dict[str, tuple[int, int, str]] = {}
        # What the engine's own commits told it (`learn`), so the diff since the loop
        # started is not asked of git again when only they moved HEAD.
        self._trees: dict[str, str] = {}  # commit -> its tree
        self._parents: dict[str, str] = {}  # commit -> its one parent
        self._counts: dict[tuple[str, str], int] = {}  # (base, head) -> commits in base..head
        self._last_diff: tuple[tuple[str, str, str, str], str] | None = None

    def _git(self, *args: str) -> str:
        """stdout of git; a failure raises `GitFailed` with the evidence (it used to read as
        "no changes", which the loop then took for an iteration without progress)."""
        # No optional locks: the agent may be running git in the same tree. Pathspec magic on:
        # PATHSPEC excludes the engine's files with `:(exclude)`, which the runner's
        # GIT_LITERAL_PATHSPECS=1 would turn into plain names (and so count them as work).
        env = {"GIT_OPTIONAL_LOCKS": "0", "GIT_LITERAL_PATHSPECS": "0"}
        return git(self.root, "-c", "core.quotepath=off", *args, timeout=self.git_timeout, env=env).out

    def _hash(self, rel: str) -> str:
        path = self.root / rel
        try:
            st = path.lstat()
        except FileNotFoundError:
            return "deleted"
        if not path.is_file() or path.is_symlink():
            return "link:" + os.readlink(path) if path.is_symlink() else "other"
        cached = self._cache.get(rel)
        if cached and cached[:2] == (st.st_size, st.st_mtime_ns):
            return cached[2]
        digest = sha256_file(path)
        self._cache[rel] = (st.st_size, st.st_mtime_ns, digest)
        return digest

    def snapshot(self) -> Snapshot:
        if not self.is_git:
            return Snapshot(None, {rel: self._hash(rel) for rel in self._walk()})
        out = self._git("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--", *PATHSPEC)
        head: str | None = None
        files: dict[str, str] = {}
        untracked: list[str] = []
        for entry in out.split("\0"):
            if entry.startswith("# branch.oid "):
                oid = entry.split(" ", 2)[2]
                head = None if oid == "(initial)" else oid
            elif entry.startswith("1 "):
                files[entry.split(" ", 8)[8]] = ""
            elif entry.startswith("2 "):
                files[entry.split(" ", 9)[9]] = ""
            elif entry.startswith("u "):
                files[entry.split(" ", 10)[10]] = ""
            elif entry.startswith("? "):
                files[entry[2:]] = ""
                untracked.append(entry[2:])
        return Snapshot(head, {rel: self._hash(rel) for rel in files}, untracked)

    def _walk(self) -> list[str]:
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root)
            if rel_dir == ".":
                dirnames[:] = [d for d in dirnames if d not in (".git", SYSTEM_DIR, INBOX_DIR)]
                filenames = [f for f in filenames if f not in (STATE_FILE, CONFIG_FILE)]
            for name in filenames:
                found.append(name if rel_dir == "." else f"{rel_dir}/{name}")
        return found

    def diffstat(self, base: Snapshot, snap: Snapshot) -> str:
        """What changed since `base` (the loop's start): `git diff --stat` plus untracked
        files and commits, or a file list without git."""
        if not self.is_git:
            lines = []
            for path in sorted(set(base.files) | set(snap.files)):
                old, new = base.files.get(path), snap.files.get(path)
                if old != new:
                    lines.append(f" {'A' if old is None else 'D' if new is None else 'M'} {path}")
            return (
                "\n".join(lines) + ("\n" if lines else "") + f" {len(lines)} file(s) changed since the loop started\n"
            )
        if snap.head == base.head and not snap.files:
            return " no changes since the loop started\n"
        text = self._diff(base.head or EMPTY_TREE, snap)
        if snap.head != base.head:
            count = self._count(base.head, snap.head) if base.head and snap.head else "?"
            text += f" {count} new commit(s) since the loop started (HEAD {str(snap.head)[:12]})\n"
        if snap.untracked:
            text += f" {len(snap.untracked)} untracked file(s):\n" + "".join(f"   {p}\n" for p in snap.untracked)
        return text

    def learn(self, sha: str, tree: str, parent: str | None, parent_tree: str | None) -> None:
        """The engine committed `sha` (its tree, its one parent and that one's tree)."""
        self._trees[sha] = tree
        if parent is not None and parent_tree is not None:
            self._parents[sha] = parent
            self._trees[parent] = parent_tree

    def _diff(self, base: str, snap: Snapshot) -> str:
        """`git diff --stat` from `base` to the working tree; not asked again while the
        tree under HEAD and the changes over it are the ones of the last answer (an
        iteration that changed nothing, or only the engine's empty task commit between)."""
        head = snap.head or ""
        key = (base, self._trees.get(head, head), Snapshot(None, snap.files).digest, "\0".join(snap.untracked))
        if self._last_diff is None or self._last_diff[0] != key:
            self._last_diff = (key, self._git("diff", "--stat=120", "--no-color", base, "--", *PATHSPEC))
        return self._last_diff[1]

    def _count(self, base: str, head: str) -> int:
        """Commits in `base..head`: the engine's own commits on top counted here, git
        asked only for what it did not make (an agent's own commits)."""
        n, h = 0, head
        while h != base:
            if (base, h) in self._counts:
                n += self._counts[(base, h)]
                break
            parent = self._parents.get(h)
            if parent is None:
                n += int(self._git("rev-list", "--count", f"{base}..{h}").strip())
                break
            n, h = n + 1, parent
        self._counts[(base, head)] = n
        return n

    def diff(self, base: Snapshot) -> str:
        """The whole diff since `base` (commits and uncommitted changes; new untracked files
        by name), for a reviewer to read (issue #42)."""
        if not self.is_git:
            return self.diffstat(base, self.snapshot())
        text = self._git("diff", "--no-color", base.head or EMPTY_TREE, "--", *PATHSPEC)
        untracked = self.snapshot().untracked
        return text + "".join(f"new untracked file: {p}\n" for p in untracked)


class IterationEvidence:
    """The evidence directory of one iteration and its SHA-256 manifest."""

    def __init__(self, run_dir: Path, mt_id: str, iteration: int):
        self.run_dir = Path(run_dir)
        self.rel = f"agent/{mt_id}/iter-{iteration:03d}"
        self.dir = self.run_dir / self.rel
        self.dir.mkdir(parents=True, exist_ok=True)
        self.hashes: dict[str, str] = {}

    def path(self, name: str) -> Path:
        return self.dir / name

    def ref(self, name: str) -> str:
        return f"{self.rel}/{name}"

    def write(self, name: str, data: str | bytes) -> str:
        raw = data.encode("utf-8") if isinstance(data, str) else data
        atomic_write(self.dir / name, raw, durable=False)
        self.hashes[self.ref(name)] = hashlib.sha256(raw).hexdigest()
        return self.ref(name)

    def write_json(self, name: str, obj: object) -> str:
        return self.write(name, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")

    def add(self, path: Path, data: bytes | None = None) -> None:
        """Record a file written by someone else (agent output, check output)."""
        if not path.exists():
            return
        rel = path.relative_to(self.run_dir).as_posix()
        self.hashes[rel] = hashlib.sha256(data).hexdigest() if data is not None else sha256_file(path)

    def write_manifest(self) -> str:
        atomic_write_json(self.dir / "manifest.json", {"algorithm": "sha256", "files": self.hashes}, durable=False)
        return self.ref("manifest.json")
