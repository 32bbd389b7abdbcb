"""The git channel: the facade the engine calls at its four sync points (docs/GIT.md).

  - `poll()`       when due: `git ls-remote` (cheap); fetch, verify and integrate only
                   when the branch moved; push whatever is still unpushed;
  - `running()`    right after RUNNING is written: remember the run's baseline, commit, push;
  - `publish()`    when the MP ended: commit protocol files + what the MP changed, push;
  - `refusal_for()` before an MP is claimed: the signature verdict of the pull that
                   brought it.
`LocalChannel` (local.py) is the same interface with git off.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mp_engine.sync.attribution as attribution
import mp_engine.sync.commit as commit
import mp_engine.sync.locks as locks
import mp_engine.sync.pull as pull
import mp_engine.sync.push as push
import mp_engine.sync.recovery as recovery
from mp_engine.config.sections import GitConfig
from mp_engine.core.errors import GitConfigChanged, InvalidMPError, RemoteUnreachable, SyncError
from mp_engine.core.events import EventLog
from mp_engine.core.gitcmd import config_problem, protect_config
from mp_engine.core.workspace import GIT_CONFIG_COPY, STATE_FILE, Workspace
from mp_engine.inbox.cancel_request import CANCEL_PATH
from mp_engine.inbox.intake import Inbox
from mp_engine.record.archive import RunArchive, runs_of
from mp_engine.sync.context import SyncContext
from mp_engine.sync.heartbeat import Heartbeat
from mp_engine.sync.local import LocalChannel
from mp_engine.sync.peek import RemotePeek
from mp_engine.sync.platform import platform_signers
from mp_engine.sync.pull import SyncOutcome
from mp_engine.sync.redact import Redactor
from mp_engine.sync.session import GitSession
from mp_engine.sync.signatures import INBOX_PATH, checked_signers_file


class GitChannel:
    """The git layer of one workspace; see the module docstring."""

    enabled = True

    def __init__(
        self,
        ws: Workspace,
        cfg: GitConfig,
        *,
        events: EventLog | None = None,
        inbox: Inbox | None = None,
        redact: Redactor | None = None,
    ):
        """`events`: the engine's event log (one writer, one redactor); `inbox`: the
        engine's, whose queue a pull fills with the MPs the slot would lose (arrivals.py)."""
        self.sync = SyncContext(ws, cfg, events=events, inbox=inbox, redact=redact)
        self.cfg = cfg
        self.ws = ws
        self._next_poll = 0.0
        self._session: GitSession | None = None
        self._remote_checked = False
        self.allowed_signers = checked_signers_file(ws.root, cfg)
        if cfg.require_signed:
            self.sync.platform = platform_signers(ws.root, cfg)
        self._peek = RemotePeek(self.sync, self.allowed_signers)
        self.heartbeat = Heartbeat(self.sync, cfg.heartbeat_interval)
        # Every engine git call in this repository checks .git/config against the copy the
        # engine accepted (gitcmd.protect_config; issue #20).
        protect_config(ws.root, ws.local_dir / GIT_CONFIG_COPY)
        self.peek_interval = cfg.poll_interval

    @property
    def unreachable(self) -> str | None:
        """Why the remote could not be reached at the last attempt, or None."""
        return self.sync.unreachable

    @contextmanager
    def session(self) -> Iterator[GitSession]:
        """The open repository, kept across sync points. A session that saw an unexpected
        error is dropped and the next sync point opens a fresh one."""
        if self._session is None:
            self._session = GitSession(self.ws.root, self.cfg.timeout)
        try:
            yield self._session
        except BaseException as e:
            if not isinstance(e, SyncError):
                self.close()
            raise

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    # -- the sync points ----------------------------------------------------------------

    def startup(self) -> None:
        """Check the repository, undo what a crash left half-done, and commit leftovers."""
        with self.session() as s:
            recovery.startup(self.sync, s)

    def next_poll_at(self) -> float:
        """Monotonic time at which the next poll is due."""
        return self._next_poll

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self._next_poll

    def poll(self) -> SyncOutcome:
        """Pull when the branch moved, then push anything unpushed. Never raises SyncError."""
        self._next_poll = time.monotonic() + self.cfg.poll_interval
        out = SyncOutcome()
        with self._sync_point("poll") as s:
            if not self._remote_checked:  # re-read the remotes only after a failure
                recovery.ensure_remote(self.sync, s)
                self._remote_checked = True
            commit.commit_unpublished(self.sync, s)
            remote_sha = pull.ls_remote(self.sync, s)
            if remote_sha is not None:
                out = pull.integrate(self.sync, s, remote_sha, self.allowed_signers)
            if out.problem is None:
                push.push(self.sync, s, out, self.allowed_signers)
        self.heartbeat.beat()
        return out

    def running(self, mp_id: str, run_id: str) -> SyncOutcome:
        """After RUNNING is written: remember when the run started and what was dirty (to
        know later what the MP changed); commit and push so the orchestrator sees RUNNING.
        The RUNNING commit holds named paths only (the state and the new run archive)."""
        out = SyncOutcome()
        with self._sync_point("running") as s:
            data = self.sync.store.load()
            if run_id not in data["baselines"]:
                data["baselines"][run_id] = attribution.new_baseline(self.ws.local_dir, data.get("dirty", {}))
                self.sync.store.save(data, durable=False)
            if self.cfg.commit_running:
                paths = [p for p in (STATE_FILE, f"{attribution.RUNS_PREFIX}{run_id}") if (self.ws.root / p).exists()]
                foreign = commit.foreign_staged(s, paths)
                if commit.commit_paths(self.sync, s, f"{mp_id}: RUNNING", paths, foreign_staged=bool(foreign)):
                    push.push(self.sync, s, out, self.allowed_signers)
        return out

    def publish(self, message: str, run_id: str | None) -> SyncOutcome:
        """When an MP ended: commit its result and changes (`message` is the outcome's
        commit summary) and push. The result is recorded as unpublished first, so a
        commit that fails (or a kill before it) is made by the next poll or start; a push
        that fails leaves the commit for the next poll."""
        out = SyncOutcome()
        data = self.sync.store.load()
        data.setdefault("unpublished", []).append({"run_id": run_id, "message": message})
        self.sync.store.save(data, durable=False)
        with self._sync_point("publish") as s:
            commit.commit_unpublished(self.sync, s)
            push.push(self.sync, s, out, self.allowed_signers)
            if (self.sync.store.blocked() or {}).get("kind") in ("conflict", "unsigned"):
                push.push_side_branch(self.sync, s)  # the orchestrator can read the result there
        return out

    def peek_cancel(self) -> bytes | None:
        """The remote branch's cancel request, read while an MP runs (sync/peek.py); the
        heartbeat goes on meanwhile (sync/heartbeat.py)."""
        self.heartbeat.beat()
        return self._peek.read(CANCEL_PATH)

    def stopping(self) -> None:
        """A clean stop: the last heartbeat says so."""
        self.heartbeat.beat(stopped=True)

    def push_branch(self, branch: str) -> None:
        """Push a work branch that did not land (agent/workbranch.py), so the orchestrator
        can see the partial or unmerged work. Forced: `mp/<MP-id>` is made afresh per run."""
        if not self.cfg.push:
            return
        with self._sync_point("work branch") as s:
            s.run("push", "--force", "--quiet", self.sync.remote_name, f"refs/heads/{branch}:refs/heads/{branch}")
            self.sync.events.emit("sync_pushed", branch=branch)

    def commit_state(self, message: str, *, if_naming: dict[str, Any] | None = None) -> SyncOutcome:
        """Commit SESSION_STATE.json alone and push it (a halt lifted on the host must
        reach the remote, or the orchestrator still reads ERROR). `if_naming`: only when
        the committed state names that engine (its `daemon`: pid, host, start), so a pass
        that published nothing commits nothing."""
        out = SyncOutcome()
        with self._sync_point("state") as s:
            if if_naming is not None and not _names(s, if_naming):
                return out
            recovery.ensure_remote(self.sync, s)
            foreign = commit.foreign_staged(s, [STATE_FILE])
            if commit.commit_paths(self.sync, s, message, [STATE_FILE], foreign_staged=bool(foreign)):
                push.push(self.sync, s, out, self.allowed_signers)
        return out

    @contextmanager
    def _sync_point(self, stage: str) -> Iterator[GitSession]:
        """The open repository for one sync point, whose failures are events, never
        exceptions: an unreachable remote is remembered (results stay committed and are
        pushed later); any other failure is `sync_failed`, and the remotes are read again
        at the next poll. A lock left by a killed git blocks every later command, so it is
        removed at once, and the next sync point (which retries what failed) can succeed."""
        if (self.sync.store.blocked() or {}).get("kind") == "git_config" and config_problem(self.ws.root) is None:
            self.sync.store.save({**self.sync.store.load(), "blocked": None})  # restored: git may run again
            self.sync.events.emit("git_config_restored", stage=stage)
        try:
            with self.session() as s:
                yield s
        except RemoteUnreachable as e:
            self._remote_checked = False
            self.sync.mark_unreachable(str(e))
        except GitConfigChanged as e:
            self._git_stopped(str(e))
        except SyncError as e:
            self._remote_checked = False
            self.sync.events.emit("sync_failed", stage=stage, error=str(e))
            if locks.is_lock_error(str(e)):
                self._remove_stale_locks()

    def _git_stopped(self, why: str) -> None:
        """.git/config changed under the engine: record it once (status, doctor and every
        result show it), and keep the commits local until it is resolved."""
        data = self.sync.store.load()
        if (data.get("blocked") or {}).get("message") != why:
            data["blocked"] = {"kind": "git_config", "message": why}
            self.sync.store.save(data)
            self.sync.events.emit("git_config_changed", error=why)

    def _remove_stale_locks(self) -> None:
        try:
            with self.session() as s:
                locks.remove_stale_locks(self.sync, recovery.git_dirs(s))
        except SyncError as again:
            self.sync.events.emit("sync_failed", stage="lock recovery", error=str(again))

    def earlier_run(self, mp_id: str, sha256: str, data: bytes) -> RunArchive | None:
        """The run that already took this very arrival of the MP, if git put it back (an
        MP runs once per arrival, issue #19). No git is asked unless an earlier run had
        exactly these bytes."""
        return next((r for r in runs_of(self.ws, mp_id, sha256) if self._same_arrival(r.run_id, data)), None)

    def _same_arrival(self, run_id: str, data: bytes) -> bool:
        """True when the inbox file holding `data` is the one run `run_id` already took: the
        commit that last wrote the inbox path comes before the run's first commit. A failed
        git operation (a half-applied merge, an autostash) can put a processed file back;
        an MP runs once per arrival (issue #19). False when git cannot tell."""
        try:
            with self.session() as s:
                if s.blob("HEAD", INBOX_PATH) != data:
                    return False  # not the file git has: it came from somewhere else
                arrival = s.run("log", "-1", "--format=%H", "--", INBOX_PATH).strip()
                ledger = f"{attribution.RUNS_PREFIX}{run_id}/ledger.json"
                first = s.run("log", "--format=%H", "--diff-filter=A", "--", ledger).split()
                return bool(arrival and first) and s.is_ancestor(arrival, first[-1])
        except SyncError:
            return False

    def refusal_for(self, data: bytes) -> InvalidMPError | None:
        """The signature refusal recorded for this exact MP, if any (consumed). Since a
        range with an unsigned commit is refused as a whole (pull.refuse_unsigned), no
        refused MP reaches the slot; this consumes what an earlier version recorded."""
        state = self.sync.store.load()
        reason = state["refusals"].pop(hashlib.sha256(data).hexdigest(), None)
        if reason is None:
            return None
        self.sync.store.save(state)
        return InvalidMPError(
            f"it arrived in commits the engine does not accept (git.require_signed): {reason}",
            "Send it again from a commit signed with a key listed in the engine's allowed-signers file "
            "(`git commit -S`, with gpg.format = ssh and user.signingkey set), adding the `Approves:` header "
            "this result names.",
        )

    def notice(self) -> str | None:
        """What every result should say about the channel: a push the remote refused, or
        git stopped because .git/config changed (known before any git call trips on it)."""
        if (problem := config_problem(self.ws.root)) is not None:
            return f"git is stopped: {problem}"
        return push.refusal_notice(self.sync.store.blocked())

    def report(self) -> dict[str, Any]:
        """Remote, branch, unpushed commit count and any block, for `mp-engine status`."""
        info: dict[str, Any] = {"remote": self.cfg.remote, "branch": self.cfg.branch}
        try:
            with self.session() as s:
                info["unpushed"] = push.unpushed(self.sync, s)
                info["head"] = (s.rev("HEAD") or "")[:12] or None
        except SyncError as e:
            info["error"] = str(e)
        blocked = self.sync.store.blocked()
        if blocked:
            info["blocked"] = blocked
        return info


Channel = GitChannel | LocalChannel
# what the engine talks to: `Engine` builds one whole, per `[git] enabled`


def _names(s: GitSession, daemon: dict[str, Any]) -> bool:
    """Whether HEAD's SESSION_STATE.json names `daemon` as the engine that wrote it."""
    code, out, _ = s.status("show", f"HEAD:{STATE_FILE}")
    try:
        committed = (json.loads(out) or {}).get("daemon") if code == 0 else None
    except (ValueError, AttributeError):
        return False
    keys = ("pid", "host", "started_at")
    return isinstance(committed, dict) and all(committed.get(k) == daemon.get(k) for k in keys)
