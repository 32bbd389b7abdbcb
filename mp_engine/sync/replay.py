"""Putting the engine's unpushed commits on top of the remote without rewriting its own
files in the working tree (issue #19), and without ever conflicting over the inbox.

`git rebase` first checks out the remote's tip and then replays the local commits, so for
a moment the working tree holds the remote's older `SESSION_STATE.json` (or none): a
reader sees the state go backwards or vanish. Here each local commit is merged with the
remote's tip in the object database (`git merge-tree --write-tree`, no working tree, no
index), recommitted with its own author and message (`git commit-tree`), and the branch
moves with `git reset --keep`, which rewrites only the paths that differ between the old
and the new tip: the orchestrator's changes. The engine's own files are the same in both
tips, so git never touches them; the engine's atomic writes stay their only writer.
(An operator's uncommitted edit in one of those paths is carried over: localedits.py.)

Merge commits are replayed too (issue #45): the landing of an agent MP's verified work is
a merge commit `MP-X: merge mp/MP-X` when the channel branch moved during the run (a
restart's commits, say). Only the channel branch's own line, its first parents, is
replayed; a merge keeps its other parents as they are, so the work branch's commits (one
per micro-task, named in the MP's result) reach the remote unchanged, and the new merge's
tree is the old one merged with the remote's changes, like any other commit's. So nothing
of the engine's own history ever needs `git rebase`.

The inbox file is the one path both sides write: the engine's result commit deletes the
MP it ran while the orchestrator's newer commit already holds the next one (and git's
rename detection may even pair the deleted MP with a step script the run archived). When
the remote changed the inbox, each commit is merged with a stand-in for `onto` whose inbox
is as at the merge base, so that path cannot conflict, and every replayed tree then gets
the remote's inbox file: the orchestrator's newer MP keeps the slot (issue #14).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mp_engine.core.errors import SyncConflict
from mp_engine.core.gitcmd import GitFailed
from mp_engine.sync.localedits import carry_over
from mp_engine.sync.session import GitSession
from mp_engine.sync.signatures import INBOX_PATH

FIELD = "%x00"


def replay(s: GitSession, head: str, onto: str, emit: Callable[..., object]) -> SyncConflict | None:
    """Replay `head`'s (HEAD's) commits since the merge base onto `onto` and move the
    branch there.

    Returns None when done, or a `SyncConflict` naming the paths when a commit does not
    apply, or an uncommitted edit cannot be carried over; then nothing was changed: refs,
    index and tree are as they were."""
    new = replayed(s, head, onto)
    if isinstance(new, SyncConflict):
        return new
    return carry_over(s, head, new, emit)


def replayed(s: GitSession, head: str, onto: str) -> str | SyncConflict:
    """The commit `head`'s line becomes on top of `onto`, made in the object database only."""
    base = s.run("merge-base", head, onto).strip()
    new = onto
    done: dict[str, str] = {}  # each local commit, as replayed
    remote_inbox = _inbox_entry(s, onto)
    merge_with = onto
    if remote_inbox != (base_inbox := _inbox_entry(s, base)):
        stand_in = _with_inbox(s, f"{onto}^{{tree}}", base_inbox)
        message = "mp-engine: the remote's tip with the inbox as at the merge base (never pushed)"
        merge_with = s.run("commit-tree", stand_in, "-p", onto, "-m", message).strip()
    for commit, parents in first_parent_line(s, base, head):
        # Each local commit merged with `onto` over their common base: the remote's changes
        # plus everything up to and including this commit. (git 2.39's merge-tree has no
        # --merge-base, so cherry-picking commit by commit onto the new chain would use the
        # wrong base from the second commit on.) For a merge commit the base is the same:
        # what it merged in is not on the remote.
        r = s.result("merge-tree", "--write-tree", "--name-only", "--no-messages", merge_with, commit)
        if r.code == 1:
            paths = [p for p in r.out.splitlines()[1:] if p]
            return SyncConflict(f"{commit[:12]} does not apply onto {onto[:12]}", paths or ["(git did not name them)"])
        if r.code != 0:
            raise GitFailed(r)
        tree = r.out.splitlines()[0]
        if merge_with != onto:
            tree = _with_inbox(s, tree, remote_inbox)
        others = [done.get(p, p) for p in parents[1:]]
        if not others and tree == s.run("rev-parse", f"{new}^{{tree}}").strip():
            done[commit] = new
            continue  # already on the remote: dropped, as `git rebase` drops it
        new = done[commit] = _recommit(s, commit, tree, [new, *others])
    return new


def first_parent_line(s: GitSession, base: str, head: str) -> list[tuple[str, list[str]]]:
    """The commits from `base` (excluded) to `head` along first parents, oldest first, each
    with all its parents: the channel branch's own line. What merges brought into it from
    beside (a work branch) is not on it."""
    parents: dict[str, list[str]] = {}
    for line in s.run("rev-list", "--parents", f"{base}..{head}").splitlines():
        commit, *of = line.split()
        parents[commit] = of
    found: list[tuple[str, list[str]]] = []
    at: str | None = head
    while at in parents:
        found.append((at, parents[at]))
        at = parents[at][0] if parents[at] else None
    return found[::-1]


def _recommit(s: GitSession, commit: str, tree: str, parents: list[str]) -> str:
    """`commit`'s author, date and message on `tree` over `parents`."""
    name, email, date, message = s.run("log", "-1", f"--format=%an{FIELD}%ae{FIELD}%aI{FIELD}%B", commit).split("\0", 3)
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}
    of = [arg for p in parents for arg in ("-p", p)]
    return s.run_env(env, *s.identity(), "commit-tree", tree, *of, "-F", "-", input=message).strip()


def _inbox_entry(s: GitSession, commit: str) -> str:
    """`MODE BLOB` of the inbox file at `commit`, or "" when it has none."""
    out = s.run("ls-tree", commit, "--", INBOX_PATH).strip()
    mode, _type, rest = out.split(" ", 2) if out else ("", "", "")
    return f"{mode} {rest.split(chr(9), 1)[0]}" if out else ""


def _with_inbox(s: GitSession, tree: str, entry: str) -> str:
    """`tree` with the inbox file set to `entry` (`MODE BLOB`, or "" for none), built in a
    temporary index: the real index and the working tree are not touched."""
    index = Path(s.repo.git_dir) / "mp-engine-replay.index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        s.run_env(env, "read-tree", tree)
        if entry:
            mode, blob = entry.split()
            s.run_env(env, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{INBOX_PATH}")
        else:
            s.run_env(env, "update-index", "--force-remove", "--", INBOX_PATH)
        return s.run_env(env, "write-tree").strip()
    finally:
        index.unlink(missing_ok=True)
