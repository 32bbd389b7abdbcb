"""Moving the channel branch, to the remote's tip (a fast-forward) or to its replayed tip,
with an operator's uncommitted edits in the paths the move rewrites carried over (issue #45).

`git reset --keep` rewrites only the paths that differ between the old and the new tip,
and refuses when one of them has an uncommitted change. The engine then used to fall back
to `git rebase --autostash`, which stashes *every* dirty file (the engine's state file
too), checks out the remote's tip and, on a conflict, leaves the tree mid-rebase until
the abort: a reader found `SESSION_STATE.json` older or missing (docs/PROTOCOL.md §5).
Here only the paths in the way are set aside, and only once a dry run in the object
database has shown that putting them back over the remote's version merges cleanly;
otherwise nothing is touched and the conflict is reported with the paths.
"""

from __future__ import annotations

from collections.abc import Callable

from mp_engine.core.errors import LocalEditsInTheWay, SyncConflict
from mp_engine.core.gitcmd import GitFailed
from mp_engine.sync.session import GitSession

NOTE = "mp-engine: uncommitted edits set aside while the branch moved"


def carry_over(s: GitSession, head: str, new: str, emit: Callable[..., object]) -> SyncConflict | None:
    """Move the branch from `head` to `new`. An uncommitted edit in a path that differs
    between them is set aside (that path alone: `git stash push -- PATH`) and merged back
    over the new version (it comes back unstaged). Returns a `SyncConflict`, with nothing
    changed, when that merge would conflict or an untracked file is where `new` has one."""
    refused = s.result("reset", "--keep", "--quiet", new)
    if refused.ok:
        return None
    edited, untracked = in_the_way(s, head, new)
    edited, untracked = drop_leftovers(s, head, new, edited, untracked, emit)
    if untracked:
        return LocalEditsInTheWay(f"untracked files on the engine host are in the way of {new[:12]}", untracked)
    if not edited:
        moved = s.result("reset", "--keep", "--quiet", new)  # with what a cut-short move left put back
        if moved.ok:
            return None
        raise GitFailed(refused)  # not an edit in the way (a lock, say): the evidence
    clash = dry_run(s, head, new)
    if clash:
        return LocalEditsInTheWay(f"uncommitted edits on the engine host conflict with {new[:12]}", clash)
    s.run(*s.identity(), "stash", "push", "--quiet", "-m", NOTE, "--", *edited)
    moved = s.result("reset", "--keep", "--quiet", new)
    popped = s.result("stash", "pop", "--quiet")
    if not moved.ok:
        raise GitFailed(moved)  # nothing moved; the pop put the edits back where they were
    if not popped.ok:  # the dry run said they merge; should git disagree, they wait in the stash
        where = f"`git -C {s.root} stash list` ({NOTE!r})"
        emit("sync_failed", stage="put back uncommitted edits", error=f"kept in {where}: {popped.err.strip()}")
        return None
    emit("sync_local_edits_carried", paths=edited, to=new[:12])
    return None


def drop_leftovers(
    s: GitSession, head: str, new: str, edited: list[str], untracked: list[str], emit: Callable[..., object]
) -> tuple[list[str], list[str]]:
    """Put back what a move cut short left: a full disk let git write the working tree but
    not the index (issue #45), so a path in the way holds exactly a version one of the
    incoming commits has there, nothing of anyone's. Such an untracked file is removed, such
    an edit of a tracked one is checked out from HEAD. Returns (edited, untracked) that
    stay in the way."""
    paths = [*edited, *untracked]
    if not paths:
        return edited, untracked
    raw = s.run("log", "--format=", "--raw", "--no-abbrev", "--no-renames", f"{head}..{new}", "--", *paths)
    incoming = {line.split()[3] for line in raw.splitlines() if line.startswith(":") and len(line.split()) > 4}
    present = [p for p in paths if (s.root / p).is_file() and not (s.root / p).is_symlink()]
    ids = dict(zip(present, s.run("hash-object", "--", *present).split(), strict=True)) if present else {}
    left = [p for p in paths if ids.get(p) not in incoming]
    if len(left) == len(paths):
        return edited, untracked
    for p in untracked:
        if p not in left:
            (s.root / p).unlink()
    restore = [p for p in edited if p not in left]
    if restore:
        s.run("checkout", "-q", "HEAD", "--", *restore)
    emit(
        "git_recovered",
        what="what a move cut short left in the working tree put back",
        paths=sorted(set(paths) - set(left)),
    )
    return [p for p in edited if p in left], [p for p in untracked if p in left]


def in_the_way(s: GitSession, head: str, new: str) -> tuple[list[str], list[str]]:
    """(tracked paths with uncommitted changes, untracked files) among the paths that
    differ between `head` and `new`."""
    changed = set(s.run("diff", "--name-only", "--no-renames", "-z", head, new).split("\0")) - {""}
    edited: list[str] = []
    untracked: list[str] = []
    for entry in s.run("status", "--porcelain=v1", "-z", "--no-renames", "--untracked-files=all").split("\0"):
        code, path = entry[:2], entry[3:]
        if path in changed:
            (untracked if code == "??" else edited).append(path)
    return edited, untracked


def dry_run(s: GitSession, head: str, new: str) -> list[str]:
    """The paths where putting the working tree's edits back over `new` would conflict: the
    merge `git stash pop` makes (base `head`, ours `new`, theirs the working tree), made in
    the object database. `git stash create` writes the working tree as a commit and
    touches nothing else; `new`'s tree over `head` gives the merge its base."""
    ident = s.identity()
    theirs = s.run(*ident, "stash", "create", NOTE).strip()
    ours = s.run(*ident, "commit-tree", f"{new}^{{tree}}", "-p", head, "-m", NOTE).strip()
    r = s.result("merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs)
    if r.code == 0:
        return []
    if r.code != 1:
        raise GitFailed(r)
    return [p for p in r.out.splitlines()[1:] if p] or ["(git did not name them)"]
