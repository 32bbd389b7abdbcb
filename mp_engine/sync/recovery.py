"""Startup: check the repository, undo what a crash left half-done, commit leftovers."""

from __future__ import annotations

import os
import re
from pathlib import Path

import mp_engine.sync.attribution as attribution
import mp_engine.sync.commit as commit
import mp_engine.sync.locks as locks
from mp_engine.core.atomic import atomic_write
from mp_engine.core.errors import SyncError
from mp_engine.core.gitcmd import accept_config
from mp_engine.core.workspace import EVENTS_FILE, SYSTEM_DIR
from mp_engine.sync.attribution import EVENT_LOG, PROTOCOL_FILES, RUNS_PREFIX
from mp_engine.sync.context import PROCESSED_REF, SyncContext
from mp_engine.sync.session import GitSession


def startup(sync: SyncContext, s: GitSession) -> None:
    locks.remove_stale_locks(sync, git_dirs(s))
    data = sync.store.load()
    if (data.get("blocked") or {}).get("kind") == "push_refused":  # a restart tries once more
        data["blocked"] = None
        sync.store.save(data)
        sync.events.emit("sync_unblocked", reason="restart: the refused push is tried again")
    top = Path(os.path.realpath(s.run("rev-parse", "--show-toplevel").strip()))
    if top != sync.ws.root:
        raise SyncError(
            f"the workspace {sync.ws.root} is inside the git working tree {top}, not its top. "
            f"Give the workspace its own repository: `mp-engine init --remote URL {sync.ws.root}`."
        )
    gitdir = Path(s.run("rev-parse", "--absolute-git-dir").strip())
    if (gitdir / "rebase-merge").exists() or (gitdir / "rebase-apply").exists():
        s.status("rebase", "--abort")
        sync.events.emit("git_recovered", what="half-finished rebase aborted")
    if (gitdir / "MERGE_HEAD").exists():
        s.status("merge", "--abort")
        sync.events.emit("git_recovered", what="half-finished merge aborted")
    branch = s.status("symbolic-ref", "--short", "-q", "HEAD")[1].strip()
    if branch != sync.cfg.branch:
        raise SyncError(
            f"the workspace repository is on {branch or 'a detached HEAD'}, not on git.branch = "
            f"{sync.cfg.branch!r}. Run `git -C {sync.ws.root} checkout {sync.cfg.branch}`."
        )
    ensure_remote(sync, s)
    untrack_event_log(sync, s)
    if s.rev(PROCESSED_REF) is None and (tracking := s.rev(sync.tracking)):
        s.update_refs({PROCESSED_REF: tracking})
    commit_leftovers(sync, s)


def git_dirs(s: GitSession) -> set[Path]:
    """The repository's git directory and, for a linked worktree, the common one."""
    return {Path(s.repo.git_dir), Path(s.repo.common_dir)}


def commit_leftovers(sync: SyncContext, s: GitSession) -> None:
    """Results whose commit failed or was cut short, runs that closed before their commit,
    then protocol files left dirty."""
    commit.commit_unpublished(sync, s)
    data = sync.store.load()
    for run_id in list(data["baselines"]):
        ledger = sync.ws.runs_dir / run_id / "ledger.json"
        if ledger.exists() and '"closed"' in ledger.read_text(encoding="utf-8"):
            mp_id = run_id.split("-", 1)[1] if "-" in run_id else run_id
            commit.commit_run(sync, s, f"{mp_id}: result committed after a restart", run_id, finished=True)
    found = attribution.changes(s, sync.ws.root)
    leftovers = [p for p in found if p in PROTOCOL_FILES or p.startswith(RUNS_PREFIX)]
    if leftovers and commit.commit_run(sync, s, "mp-engine: commit protocol files left by a restart", None, found):
        sync.events.emit("git_recovered", what="uncommitted protocol files committed")
    elif not leftovers:  # `commit_run` records the dirty set; without a commit, do it here
        commit.remember(sync, sync.store.load(), attribution.select(sync.ws.root, found, None)[1])


def untrack_event_log(sync: SyncContext, s: GitSession) -> None:
    """Workspaces made before 0.2 track SYSTEM/events.jsonl (the engine has moved the
    file to SYSTEM/.engine/): commit its removal, once. Left for the next start when
    the operator has something staged (a plain commit would take it too)."""
    if s.status("ls-files", "--error-unmatch", "--", EVENT_LOG)[0] != 0:
        return
    staged = s.staged()
    if staged:
        sync.events.emit(
            "sync_failed",
            stage="untrack the old event log",
            error=f"left for the next start: other changes are staged ({', '.join(staged[:5])})",
        )
        return
    s.run("rm", "--cached", "--quiet", "--", EVENT_LOG)
    paths = [EVENT_LOG]
    ignore = sync.ws.system_dir / ".gitignore"
    text = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
    if f"/{EVENTS_FILE}" not in text.split():  # a stale copy a merge brings back stays out of status
        atomic_write(ignore, (text.rstrip("\n") + "\n" if text.strip() else "") + f"/{EVENTS_FILE}\n")
        s.run("--literal-pathspecs", "add", "--", f"{SYSTEM_DIR}/.gitignore")
        paths.append(f"{SYSTEM_DIR}/.gitignore")
    message = "mp-engine: the event log stays on the host; each run's events travel in its archive"
    code, out, err = s.status(*s.identity(), "commit", "--quiet", "--no-verify", "-m", message)
    if code != 0 and "nothing to commit" not in out + err:
        raise SyncError(f"`git commit` failed ({code}): {(err or out).strip()}")
    sync.events.emit("git_recovered", what="old event log untracked", paths=paths)


def ensure_remote(sync: SyncContext, s: GitSession) -> None:
    """`git.remote` names a remote, or is a URL that `origin` gets (or already has)."""
    names = s.remotes()
    if sync.cfg.remote in names:
        return
    if not re.search(r"[:/]", sync.cfg.remote):
        raise SyncError(
            f"git.remote = {sync.cfg.remote!r} is neither a remote of {sync.ws.root} nor a URL. "
            f"Add it with `git -C {sync.ws.root} remote add {sync.cfg.remote} URL`."
        )
    url = sync.cfg.remote
    if "origin" in names and names["origin"] != url:
        raise SyncError(
            f"git.remote is the URL {url}, but remote `origin` points at {names['origin']}. "
            'Set git.remote = "origin" to use it, or change its URL with `git remote set-url origin URL`.'
        )
    if "origin" not in names:
        s.run("remote", "add", "origin", url)
        accept_config(sync.ws.root)  # the engine's own change to .git/config
    sync.remote_name = "origin"
