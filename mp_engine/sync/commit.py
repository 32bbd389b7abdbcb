"""Commits of the engine: named paths only, redacted before they travel, no hooks."""

from __future__ import annotations

from typing import Any

import mp_engine.sync.attribution as attribution
import mp_engine.sync.size_cap as size_cap
from mp_engine.core.atomic import atomic_write
from mp_engine.core.errors import SyncError
from mp_engine.core.workspace import INBOX_FILE
from mp_engine.sync.attribution import RUNS_PREFIX, Change
from mp_engine.sync.context import SyncContext
from mp_engine.sync.redact import redact_file
from mp_engine.sync.session import GitSession

PATHS_ON_COMMAND_LINE = 16 * 1024  # bytes of paths passed as arguments (ARG_MAX is far above)


def commit_run(
    sync: SyncContext,
    s: GitSession,
    message: str,
    run_id: str | None,
    found: dict[str, Change] | None = None,
    *,
    finished: bool = False,
    published: bool = False,
) -> str | None:
    """Commit the protocol files and what run `run_id` changed; return the new HEAD.
    `finished`: the run is over, so its baseline is dropped once the commit is made;
    `published`: this is the first unpublished result, whose entry goes in the same write."""
    if found is None:
        found = attribution.changes(s, sync.ws.root)
    data = sync.store.load()
    baseline = data["baselines"].get(run_id) if run_id else None
    if run_id and baseline is None:
        # The engine died between RUNNING and recording the baseline (issue #19): the run's
        # ledger says when it was claimed, which is all attribution needs. A run whose
        # result is already in HEAD had its baseline and dropped it after that commit.
        derived = attribution.derived_baseline(sync.ws, run_id, data.get("dirty", {}))
        if derived is not None and not _result_committed(s, run_id):
            baseline = derived
            sync.events.emit("git_recovered", what="baseline derived from the run's ledger", run=run_id)
    paths, left = attribution.select(sync.ws.root, found, baseline)
    paths, held = size_cap.hold_back(sync, data, paths, run_id)
    foreign = [p for p, ch in found.items() if ch.code[0] not in " ?" and p not in paths]
    # A deletion already in the index (a crash between `git add` and `git commit`) is
    # committed as it is: `git add -- PATH` of a path gone from index and tree fails.
    staged_deletions = {p for p, ch in found.items() if ch.code[0] == "D"}
    head = commit_paths(
        sync, s, message, paths, foreign_staged=bool(foreign), already_staged=staged_deletions, unstage=held
    )
    remember(sync, data, left, forget=run_id if finished else None, published=published)
    return head


def _result_committed(s: GitSession, run_id: str) -> bool:
    return s.status("cat-file", "-e", f"HEAD:{RUNS_PREFIX}{run_id}/RESULT.md")[0] == 0


def commit_unpublished(sync: SyncContext, s: GitSession) -> None:
    """Commit the results whose commit has not been made yet: the MP that just ended, or
    one whose commit failed (a stale git lock, a full disk, a kill between `git add` and
    `git commit`), retried at startup and at every poll until it succeeds. An entry goes
    only after its commit, so a result is never lost and committed once."""
    while pending := sync.store.load().get("unpublished"):
        entry = pending[0]
        commit_run(sync, s, entry["message"], entry["run_id"], finished=True, published=True)


def remember(
    sync: SyncContext, data: dict[str, Any], left: dict[str, str], *, forget: str | None = None, published: bool = False
) -> None:
    """Store the dirty set that stays local, drop run `forget`'s baseline and, once its
    commit is made, the first unpublished result: one write."""
    changed = data.get("dirty") != left
    data["dirty"] = left
    if forget is not None and data["baselines"].pop(forget, None) is not None:
        changed = True
    if published:
        data["unpublished"] = data.get("unpublished", [])[1:]
        changed = True
    if changed:
        sync.store.save(data, durable=False)


def foreign_staged(s: GitSession, paths: list[str]) -> list[str]:
    """Staged paths other than `paths` (and what lies under them)."""
    return [p for p in s.staged() if not any(p == q or p.startswith(q + "/") for q in paths)]


def commit_paths(
    sync: SyncContext,
    s: GitSession,
    message: str,
    paths: list[str],
    *,
    foreign_staged: bool,
    already_staged: set[str] | frozenset[str] = frozenset(),
    unstage: list[str] | None = None,
) -> str | None:
    """Stage `paths` by name and commit them (and nothing else); return the new HEAD.
    `unstage`: files inside those paths (a new directory) that must stay out (size_cap.py).

    Plain `git commit` when nothing else is staged; `git commit --only` semantics
    (pathspec) otherwise, which rebuilds a temporary index and costs twice as much in a
    large tree."""
    if not paths:
        return None
    _redact_archives(sync, paths, skip=set(unstage or ()))
    # `--literal-pathspecs`: these are file names, never patterns or `:(magic)`. A short
    # list goes on the command line (no file to create); a long one through a file.
    spec = _pathspec(sync, paths, "gitsync.pathspec")
    to_add = [p for p in paths if p not in already_staged]
    if to_add:
        add_spec = spec if len(to_add) == len(paths) else _pathspec(sync, to_add, "gitsync.addspec")
        s.run("--literal-pathspecs", "add", "--all", *add_spec)
    if unstage:
        s.run("--literal-pathspecs", "reset", "-q", *_pathspec(sync, unstage, "gitsync.unstage"))
    only = spec if foreign_staged else []
    code, out, err = s.status(
        "--literal-pathspecs", *s.identity(), "commit", "--quiet", "--no-verify", "-m", message, *only
    )
    if code != 0:
        if "nothing to commit" in out + err or "no changes added" in out + err:
            return None
        raise SyncError(f"`git commit` failed ({code}): {(err or out).strip()}")
    head = s.rev("HEAD")
    sync.events.emit("sync_committed", message=message, files=len(paths), head=head[:12] if head else None)
    return head


def _pathspec(sync: SyncContext, paths: list[str], name: str) -> list[str]:
    """`-- PATHS` on the command line, or a NUL-separated pathspec file past 16 KiB."""
    if sum(len(p) + 1 for p in paths) <= PATHS_ON_COMMAND_LINE:
        return ["--", *paths]
    spec_file = sync.ws.local_dir / name
    atomic_write(spec_file, "\0".join(paths) + "\0", durable=False)
    return [f"--pathspec-from-file={spec_file}", "--pathspec-file-nul"]


def _redact_archives(sync: SyncContext, paths: list[str], skip: set[str]) -> None:
    """The run archive holds raw step output: mask it before it travels. The MP as
    received stays byte-exact (its SHA-256 is its identity); files held back on the host
    (`skip`, over `max_file_bytes`) never travel, so they are not read."""
    if sync.redact is None:
        return
    for path in paths:
        if path.startswith(RUNS_PREFIX) and not path.endswith("/" + INBOX_FILE):
            target = sync.ws.root / path
            files = [target] if not target.is_dir() else [f for f in target.rglob("*") if f.is_file()]
            for f in files:
                if f.name != INBOX_FILE and f.relative_to(sync.ws.root).as_posix() not in skip:
                    redact_file(f, sync.redact)
