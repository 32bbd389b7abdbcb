"""Pulling: notice that the branch moved, fetch it, verify it, bring it into the tree.

`integrate` fast-forwards when the engine has nothing unpushed and replays its own
commits onto the remote otherwise (replay.py). It refuses a rewritten history (the
processed marker must stay an ancestor) and, under `require_signed`, a range with any
commit not signed by an allowed signer; on a conflict it changes nothing and reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import mp_engine.sync.arrivals as arrivals
from mp_engine.core.errors import LocalEditsInTheWay, SyncConflict, SyncError
from mp_engine.inbox.header import header_summary
from mp_engine.record.diagnosis import REFUSED_KIND, Diagnosis
from mp_engine.sync.context import PROCESSED_REF, SyncContext
from mp_engine.sync.localedits import carry_over
from mp_engine.sync.replay import replay
from mp_engine.sync.session import GitSession
from mp_engine.sync.signatures import INBOX_PATH, check_range


@dataclass
class SyncOutcome:
    """What a sync point did that the engine must act on."""

    integrated: bool = False  # new remote commits are now in the working tree
    problem: Diagnosis | None = None  # record an ERROR result with this diagnosis
    problem_mp: str | None = None


def ls_remote(sync: SyncContext, s: GitSession) -> str | None:
    """The remote branch's tip (one `git ls-remote`), or None if it does not exist."""
    ref = f"refs/heads/{sync.cfg.branch}"
    out = s.run("ls-remote", "--heads", sync.remote_name, ref)
    sync.mark_reachable()
    return tip_in(out, ref)


def tip_in(ls_remote_output: str, ref: str) -> str | None:
    """The commit `git ls-remote` printed for `ref`, or None."""
    for line in ls_remote_output.splitlines():
        sha, _, name = line.partition("\t")
        if name == ref:
            return sha
    return None


def fetch(sync: SyncContext, s: GitSession) -> tuple[str | None, bool]:
    """Fetch the branch into the tracking ref: (its new tip, whether the update was a
    fast-forward). Without `+` first, so git itself refuses a rewritten tip and a
    success proves the old tip is an ancestor of the new one; then forced."""
    spec = f"refs/heads/{sync.cfg.branch}:{sync.tracking}"
    if s.rev(sync.tracking) is not None:
        if s.status("fetch", "--no-tags", "--quiet", sync.remote_name, spec)[0] == 0:
            sync.mark_reachable()
            return s.rev(sync.tracking), True
    s.run("fetch", "--no-tags", "--quiet", sync.remote_name, f"+{spec}")
    sync.mark_reachable()
    return s.rev(sync.tracking), False


def integrate(sync: SyncContext, s: GitSession, remote_sha: str, allowed_signers: str) -> SyncOutcome:
    """Bring `remote_sha` into the working tree: verify, then ff-only or rebase."""
    head = s.rev("HEAD")
    tracking = s.rev(sync.tracking)
    if head is not None and (remote_sha == head or (tracking == remote_sha and s.is_ancestor(remote_sha, head))):
        return SyncOutcome()
    data = sync.store.load()
    blocked = data["blocked"]
    if blocked and blocked.get("remote") == remote_sha:
        return SyncOutcome()  # already reported; wait until the remote moves again
    fast_forward = False
    if tracking != remote_sha:
        fetched, fast_forward = fetch(sync, s)
        remote_sha = fetched or remote_sha
    if head is None:  # an unborn branch (fresh `git init`): adopt the remote as it is
        s.run("reset", "-q", remote_sha)
        s.update_refs({PROCESSED_REF: remote_sha})
        sync.events.emit("sync_pulled", to=remote_sha[:12], how="adopted")
        return integrated(sync)
    processed = s.rev(PROCESSED_REF)
    # A fast-forward fetch from the processed tip has already proved it an ancestor.
    proven = fast_forward and processed == tracking
    if processed and not proven and not s.is_ancestor(processed, remote_sha):
        return refuse_rewrite(sync, data, processed, remote_sha)
    versions = arrivals.incoming_versions(s, head, remote_sha)
    if sync.cfg.require_signed:
        known = [head] + ([processed] if processed else [])
        verdict = check_range(
            s.run, remote_sha, known, allowed_signers, sync.cfg.allowed_gpg_keys, platform=sync.platform, root=s.root
        )
        if not verdict.ok:  # nothing of the range reaches the workspace (issue #20)
            return refuse_unsigned(sync, s, data, remote_sha, verdict.reason, versions)
    queued = arrivals.queue_arrivals(sync, s, head, versions)
    try:
        how = bring_in(s, head, processed, remote_sha, sync.events.emit)
    except SyncError:
        unqueue(sync, queued)
        raise
    if isinstance(how, SyncConflict):
        unqueue(sync, queued)
        return block_on_conflict(sync, s, data, remote_sha, how)
    s.update_refs({PROCESSED_REF: remote_sha})
    if data["blocked"]:
        data["blocked"] = None
        sync.store.save(data)
        sync.events.emit("sync_unblocked", remote=remote_sha[:12])
    sync.events.emit("sync_pulled", **{"from": head[:12], "to": remote_sha[:12], "how": how})
    return integrated(sync)


def bring_in(
    s: GitSession, head: str, processed: str | None, remote_sha: str, emit: Callable[..., object]
) -> str | SyncConflict:
    """Move the branch to `remote_sha`: a fast-forward, or the engine's unpushed commits
    (its landing merges included) replayed onto it without rewriting its files in the tree.
    Never `git rebase` nor `merge --autostash`, which stash every dirty file, the state file
    too (issue #45). Returns how, or the conflict (nothing moved)."""
    # processed == head is the common case (nothing local since the last push), and then
    # the rewrite check already proved head is an ancestor of the remote.
    if head == processed or s.is_ancestor(head, remote_sha):
        return _fast_forward(s, head, remote_sha, emit) or "fast-forward"
    return replay(s, head, remote_sha, emit) or "rebase"


def unqueue(sync: SyncContext, queued: list[str]) -> None:
    """Not integrated: the slot still holds its MP, so what was queued for it goes."""
    if sync.inbox is not None:
        sync.inbox.queue.rollback(queued)


def integrated(sync: SyncContext) -> SyncOutcome:
    """New remote commits are in the working tree: git wrote the inbox file whole, under
    the engine's lock, so the inbox is told it is complete (no settle time to wait)."""
    if sync.inbox is not None:
        sync.inbox.note_complete()
    return SyncOutcome(integrated=True)


def refuse_unsigned(
    sync: SyncContext, s: GitSession, data: dict, remote_sha: str, reason: str, versions: list[tuple[str, bool]]
) -> SyncOutcome:
    """Refuse the whole range up to `remote_sha`, as a rewrite is refused: with
    `require_signed`, one commit not signed by an allowed signer keeps every commit after
    it out of the workspace (its MPs, and any change to mp-engine.toml, say). An ERROR
    result without a halt names the commit; the engine waits for the remote to move."""
    mps = [
        header_summary(b) for commit, present in versions if present and (b := s.blob(commit, INBOX_PATH)) is not None
    ]
    data["blocked"] = {"kind": "unsigned", "remote": remote_sha, "reason": reason}
    sync.store.save(data)
    sync.events.emit("sync_refused", to=remote_sha[:12], reason=reason, mps=mps)
    processed = s.rev(PROCESSED_REF) or s.rev("HEAD") or "the last commit the engine processed"
    branch = sync.cfg.branch
    carried = f" It carried {', '.join(mps)}, which did not run." if mps else ""
    return SyncOutcome(
        problem=Diagnosis(
            REFUSED_KIND,
            "unsigned commits refused",
            f"The commits on {branch} up to {remote_sha[:12]} were refused as a whole, because [git] "
            f"require_signed is on and {reason}. Nothing from them was pulled or executed.{carried}",
            f"Take the unsigned commit off {branch} and push the work again as signed commits: rebuild the branch "
            f"on {processed[:12]} (`git rebase --exec 'git commit --amend --no-edit -S' {processed[:12]}`, or reset "
            f"to it and commit again with a key in the allowed-signers file), then `git push --force-with-lease`.",
        ),
        problem_mp=(mps[-1].split(" ", 1)[0] if mps else None),
    )


def _fast_forward(s: GitSession, head: str, remote_sha: str, emit: Callable[..., object]) -> SyncConflict | None:
    """`git merge --ff-only`, which keeps what the operator staged. When git refuses because
    a local change (or an untracked file) is in the way, the move is `carry_over`'s: only
    those paths set aside, never `--autostash`, which stashed every dirty file and so wrote
    SESSION_STATE.json back in place: a reader found it missing or empty (issue #45)."""
    code, _out, err = s.status("merge", "--ff-only", "--quiet", remote_sha)
    if code == 0:
        return None
    if "would be overwritten" not in err and "untracked working tree files" not in err:
        raise SyncError(f"`git merge --ff-only {remote_sha[:12]}` failed ({code}): {err.strip()}")
    return carry_over(s, head, remote_sha, emit)


def block_on_conflict(
    sync: SyncContext, s: GitSession, data: dict, remote_sha: str, conflict: SyncConflict
) -> SyncOutcome:
    side = sync.side_branch
    unpushed = s.count(f"{remote_sha}..HEAD")
    data["blocked"] = {"kind": "conflict", "remote": remote_sha, "paths": conflict.paths}
    sync.store.save(data)
    sync.events.emit("sync_conflict", remote=remote_sha[:12], paths=conflict.paths, unpushed=unpushed, side_branch=side)
    paths = ", ".join(conflict.paths)
    branch = sync.cfg.branch
    return SyncOutcome(
        problem=Diagnosis(
            "git_conflict",
            "git conflict with the remote",
            f"The engine's {unpushed} unpushed commit(s) cannot be rebased onto {branch} at "
            f"{remote_sha[:12]}: both sides changed {paths} ({conflict}). Nothing was changed: the merge was "
            f"tried in git's object database only, and the engine's commits are kept locally and on branch {side}.",
            fix_for(conflict, branch, paths, sync.ws.root),
        )
    )


def fix_for(conflict: SyncConflict, branch: str, paths: str, root: Path) -> str:
    """The one fix of a conflict: on the engine host for its own uncommitted edits, else on the remote."""
    if isinstance(conflict, LocalEditsInTheWay):
        return (
            f"On the engine host, commit or set aside the uncommitted edits of {paths} (`git -C {root} stash push "
            f"-- PATHS`); the engine tries again when {branch} moves on the remote (an MP with `Approves:` does)."
        )
    return (
        f"On {branch}, revert the remote's change to {paths} (e.g. `git revert` the commit that "
        f"made it) and push; the engine then rebases and pushes its results by itself."
    )


def refuse_rewrite(sync: SyncContext, data: dict, processed: str, remote_sha: str) -> SyncOutcome:
    data["blocked"] = {"kind": "rewrite", "remote": remote_sha, "processed": processed}
    sync.store.save(data)
    sync.events.emit("sync_refused", reason="history rewritten", processed=processed[:12], remote=remote_sha[:12])
    return SyncOutcome(
        problem=Diagnosis(
            "history_rewritten",
            "remote history rewritten",
            f"{sync.cfg.branch} on the remote was force-pushed to {remote_sha[:12]}, which no longer contains "
            f"{processed[:12]}, history the engine already processed. Nothing from the rewritten history was "
            "pulled or executed.",
            f"Restore the processed history: on the engine host run `git -C {sync.ws.root} push --force "
            f"{sync.remote_name} HEAD:{sync.cfg.branch}`, then send the MP again.",
        )
    )
