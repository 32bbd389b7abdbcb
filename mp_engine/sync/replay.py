"""Putting the engine's unpushed commits on top of the remote without rewriting its own
files in the working tree (issue #19).

`git rebase` first checks out the remote's tip and then replays the local commits, so for
a moment the working tree holds the remote's older `SESSION_STATE.json` (or none): a
reader sees the state go backwards or vanish. Here each local commit is merged with the
remote's tip in the object database (`git merge-tree --write-tree`, no working tree, no
index), recommitted with its own author and message (`git commit-tree`), and the branch
moves with `git reset --keep`, which rewrites only the paths that differ between the old
and the new tip: the orchestrator's changes. The engine's own files are the same in both
tips, so git never touches them; the engine's atomic writes stay their only writer.
"""

from __future__ import annotations

from mp_engine.errors import SyncConflict
from mp_engine.sync.session import GitSession

FIELD = "%x00"


def replay(s: GitSession, onto: str) -> SyncConflict | None | bool:
    """Replay HEAD's commits since the merge base onto `onto` and move the branch there.

    Returns None when done; a `SyncConflict` naming the paths when a commit does not
    apply (nothing was changed: refs, index and tree are as they were); False when this
    path cannot be taken (merge commits to replay, or uncommitted changes in a path the
    remote changed), and the caller rebases the ordinary way."""
    base = s.run("merge-base", "HEAD", onto).strip()
    lines = [line.split() for line in s.run("rev-list", "--reverse", "--parents", f"{base}..HEAD").splitlines()]
    if any(len(parts) != 2 for parts in lines):
        return False
    new = onto
    for commit, _parent in lines:
        # Each local commit merged with `onto` over their common base: the remote's changes
        # plus everything up to and including this commit. (git 2.39's merge-tree has no
        # --merge-base, so cherry-picking commit by commit onto the new chain would use the
        # wrong base from the second commit on.)
        r = s.result("merge-tree", "--write-tree", "--name-only", "--no-messages", onto, commit)
        if r.code == 1:
            paths = [p for p in r.out.splitlines()[1:] if p]
            return SyncConflict(f"{commit[:12]} does not apply onto {onto[:12]}", paths or ["(git did not name them)"])
        if r.code != 0:
            return False
        tree = r.out.splitlines()[0]
        if tree == s.run("rev-parse", f"{new}^{{tree}}").strip():
            continue  # already on the remote: dropped, as `git rebase` drops it
        new = _recommit(s, commit, tree, new)
    if s.result("reset", "--keep", "--quiet", new).code != 0:
        return False
    return None


def _recommit(s: GitSession, commit: str, tree: str, parent: str) -> str:
    """`commit`'s author, date and message on `tree` over `parent`."""
    name, email, date, message = s.run("log", "-1", f"--format=%an{FIELD}%ae{FIELD}%aI{FIELD}%B", commit).split("\0", 3)
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
    return s.run_env(env, *s.identity(), "commit-tree", tree, "-p", parent, "-F", "-", input=message).strip()
