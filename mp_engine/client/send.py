"""The orchestrator's side of the channel: `mp-engine send FILE --repo URL_OR_PATH`.

Validate the MP (as `check` does), put it in the inbox of a working clone, commit, push;
with `--wait`, poll the remote until the engine pushes the result for exactly these bytes
(`MP-SHA256:` in RESULT_last.md), print it, and exit by its status.

Exit codes (docs/GIT.md):
  0  sent (without --wait), or already waiting or run (nothing sent; `--rerun` sends an MP
     that ran again), or the result is COMPLETED
  1  the MP is invalid (nothing sent), or the result is ERROR, CANCELLED or SUPERSEDED
  6  the engine is halted and the MP does not approve the halt (nothing sent; --force sends)
  7  --wait timed out before the result arrived (the MP stays sent)
  8  git failed: clone, fetch or push (the message says which and why)
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

import mp_engine.sync.heartbeat as heartbeat
from mp_engine.client.channel import (
    Already,
    cannot_run,
    describe_pending,
    field_of,
    progress_line,
    results_at,
    state_at,
)
from mp_engine.core.errors import InvalidMPError, SyncError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.gitcmd import git
from mp_engine.core.workspace import RESULT_FILE, STATE_FILE, SYSTEM_DIR
from mp_engine.execute.shell import require_executable
from mp_engine.inbox.answer import ANSWER_PATH
from mp_engine.inbox.answer import render as render_answer
from mp_engine.inbox.cancel_request import CANCEL_PATH
from mp_engine.inbox.header import header_summary
from mp_engine.inbox.mpfile import MicroProject, parse
from mp_engine.sync.heartbeat import HEARTBEAT_BRANCH, verdict
from mp_engine.sync.push import PushRejected, push_checked
from mp_engine.sync.session import GitSession
from mp_engine.sync.signatures import INBOX_PATH

RESULT_PATH = f"{SYSTEM_DIR}/{RESULT_FILE}"
GIT_TIMEOUT = 120.0
# What a precheck may answer instead of sending: `Already`, an exit code, or either.
Refusal = TypeVar("Refusal", bound=Already | int)
# What the orchestrator's clone checks out (git sparse-checkout, non-cone patterns).
SPARSE = ["/Claude_Inbox/", f"/{STATE_FILE}", f"/{SYSTEM_DIR}/RESULT_last.*", f"/{SYSTEM_DIR}/results*.jsonl"]


class Sender:
    def __init__(
        self,
        repo: str,
        branch: str,
        echo: Callable[[str], None],
        err: Callable[[str], None],
        force_hint: str | None = "send it anyway with --force",
    ):
        self.repo_arg = repo
        self.force_hint = force_hint  # how this caller forces an MP past a halt, if it can
        self.branch = branch
        self.echo = echo
        self.err = err
        self.tracking = f"refs/remotes/origin/{branch}"

    # -- the working clone -----------------------------------------------------------

    def working_clone(self) -> Path:
        """The clone to commit in: REPO itself if it is a working tree, else a cached clone."""
        path = Path(self.repo_arg).expanduser()
        if path.is_dir() and (path / ".git").exists():
            return path.resolve()
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mp-engine" / "send"
        dest = cache / hashlib.sha256(self.repo_arg.encode()).hexdigest()[:16]
        if not (dest / ".git").exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            # Blob-filtered (where the server allows it; otherwise a full clone) and
            # sparse: the run archives are neither fetched whole nor checked out.
            git(
                dest.parent,
                "clone",
                "--quiet",
                "--filter=blob:none",
                "--no-checkout",
                self.repo_arg,
                str(dest),
                timeout=GIT_TIMEOUT,
            )
            git(dest, "sparse-checkout", "set", "--no-cone", *SPARSE, timeout=GIT_TIMEOUT)
        return dest

    def at_tip(self) -> tuple[GitSession, str]:
        """A session on the working clone, moved onto the remote branch's tip; the tip.
        The caller closes the session."""
        clone = self.working_clone()
        s = GitSession(clone, GIT_TIMEOUT)
        try:
            return s, self.refresh(s, own_clone=clone != Path(self.repo_arg).expanduser().resolve())
        except BaseException:
            s.close()
            raise

    def refresh(self, s: GitSession, *, own_clone: bool) -> str:
        """Fetch the branch and move the clone onto it; return the remote tip."""
        s.run("fetch", "--quiet", "--no-tags", "origin", f"+refs/heads/{self.branch}:{self.tracking}")
        tip = s.rev(self.tracking)
        if tip is None:
            raise SyncError(
                f"the remote has no branch {self.branch!r}. Set up the engine first: "
                f"`mp-engine init --remote {self.repo_arg} --branch {self.branch}` on the engine host."
            )
        if own_clone:
            s.run("checkout", "--quiet", "-B", self.branch, tip)
            s.run("reset", "--quiet", "--hard", tip)
        else:
            s.run("checkout", "--quiet", self.branch)
            s.run("merge", "--ff-only", "--quiet", tip)
        return tip

    # -- sending ---------------------------------------------------------------------

    def send(self, data: bytes, mp: MicroProject, force: bool, rerun: bool = False) -> tuple[Path, str] | Already | int:
        """Commit and push `data`; nothing when the remote's inbox holds these bytes, or a
        result names them (unless `rerun`), or the engine is halted and `mp` does not
        approve it (unless `force`)."""

        def precheck(s: GitSession, tip: str, first: bool) -> Already | int | None:
            state, pending = state_at(s, tip), s.blob(tip, INBOX_PATH)
            if pending == data:
                return Already("waiting", s.run("log", "-1", "--format=%H", tip, "--", INBOX_PATH).strip() or tip)
            ran = [r for r in results_at(s, tip) if r.get("mp_sha256") == mp.sha256]
            if ran and not rerun:
                return Already("ran", tip, ran[-1])
            refused = cannot_run(state, mp, self.force_hint)
            if refused and not force:
                self.err(f"not sent: {refused}")
                return ExitCode.NOT_RUNNABLE
            if pending is not None and first:
                self.err(f"{describe_pending(pending, state)}; {mp.mp_id} is queued behind it")
            return None

        title = f" {mp.title}" if mp.title else ""
        return self.commit(INBOX_PATH, data, f"{mp.mp_id}: send{title}", precheck)

    def cancel(self, mp_id: str) -> tuple[Path, str, str | None] | Already | int:
        """Commit `Claude_Inbox/cancel_request.txt` naming `mp_id`; also return the SHA-256
        of that MP when the remote's inbox holds it (what `--wait` looks for). Nothing when
        the MP neither runs nor waits and its result is in."""
        found: list[str | None] = [None]

        def precheck(s: GitSession, tip: str, first: bool) -> Already | int | None:
            state, pending = state_at(s, tip), s.blob(tip, INBOX_PATH)
            waiting = pending is not None and header_summary(pending).split(" ", 1)[0] == mp_id
            found[0] = hashlib.sha256(pending).hexdigest() if waiting and pending is not None else None
            running = state.get("status") == "RUNNING" and state.get("current") == mp_id
            ended = [r for r in results_at(s, tip) if r.get("mp_id") == mp_id]
            if not waiting and not running and ended:
                return Already("finished", tip, ended[-1])
            if first and not waiting and not running:
                self.err(
                    f"{mp_id} is neither running nor waiting in the remote's inbox (the engine is "
                    f"{state.get('status', '?')}, current {state.get('current', '?')}); the engine will record "
                    "the request as ignored"
                )
            return None

        sent = self.commit(CANCEL_PATH, f"{mp_id}\n".encode(), f"{mp_id}: cancel", precheck)
        return sent if isinstance(sent, int | Already) else (*sent, found[0])

    def answer(self, mp_id: str, text: str, mt: str | None) -> tuple[Path, str, str | None] | int:
        """Commit `Claude_Inbox/answer.txt` answering `mp_id`, which the engine must be
        halted on; also return that MP's SHA-256 (the answered run's result names it)."""
        found: list[str | None] = [None]

        def precheck(s: GitSession, tip: str, first: bool) -> int | None:
            state = state_at(s, tip)
            halt = state.get("halt") or {}
            if halt.get("mp_id") != mp_id:
                on = f"halted on {halt['mp_id']}" if halt.get("mp_id") else f"{state.get('status', '?')}, not halted"
                self.err(f"not sent: {mp_id} waits for no answer (the engine is {on})")
                return ExitCode.NOT_RUNNABLE
            last = state.get("last_result") or {}
            found[0] = last.get("mp_sha256") if last.get("mp_id") == mp_id else None
            return None

        sent = self.commit(ANSWER_PATH, render_answer(mp_id, text, mt).encode(), f"{mp_id}: answer", precheck)
        return sent if isinstance(sent, int) else (*sent, found[0])

    def commit(
        self,
        path: str,
        data: bytes,
        message: str,
        precheck: Callable[[GitSession, str, bool], Refusal | None],
    ) -> tuple[Path, str] | Refusal:
        """Write `path` in the working clone, commit and push it on the remote's tip,
        redone on a fresh tip when another push got there first. `precheck(session, tip,
        first attempt)` may refuse with an exit code, or find it `Already` done."""
        clone = self.working_clone()
        own = clone != Path(self.repo_arg).expanduser().resolve()
        s = GitSession(clone, GIT_TIMEOUT)
        try:
            sent: str | None = None
            for attempt in Retrying(
                stop=stop_after_attempt(5),
                wait=wait_exponential_jitter(multiplier=0.1, max=3, jitter=0.3),
                retry=retry_if_exception_type(PushRejected),
                reraise=True,
            ):
                with attempt:
                    tip = self.refresh(s, own_clone=own)
                    refused = precheck(s, tip, attempt.retry_state.attempt_number == 1)
                    if refused is not None:
                        return refused
                    target = clone / path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                    s.run("add", "--", path)
                    s.run("commit", "--quiet", "-m", message, "--", path)
                    sent = s.rev("HEAD")
                    try:
                        push_checked(s, "origin", self.branch, GIT_TIMEOUT)
                    except PushRejected:
                        s.run("reset", "--quiet", "--hard", tip)  # drop our commit; redo on the new tip
                        raise
            assert sent is not None
            s.run("update-ref", self.tracking, sent)
            return clone, sent
        finally:
            s.close()

    # -- waiting ---------------------------------------------------------------------

    def wait(
        self,
        clone: Path,
        sent: str,
        target: tuple[str, str, str],  # (MP id, its SHA-256, the result status that exits 0)
        timeout: float,
        poll: float,
        stop: threading.Event,
    ) -> int:
        mp_id, sha256, good = target
        deadline = time.monotonic() + timeout
        last_tip = sent
        said = ""
        while True:
            s = GitSession(clone, GIT_TIMEOUT)
            try:
                out = s.run("ls-remote", "--heads", "origin", f"refs/heads/{self.branch}")
                tip = out.split("\t", 1)[0] if out else ""
                if tip and tip != last_tip:
                    s.run("fetch", "--quiet", "--no-tags", "origin", f"+refs/heads/{self.branch}:{self.tracking}")
                    last_tip = tip
                    found = self._find_result(s, sent, sha256)
                    if found is not None:
                        self.echo(found.rstrip("\n"))
                        return ExitCode.OK if field_of(found, "Status") == good else ExitCode.MP_ERROR
                    progress = progress_line(state_at(s, self.tracking), mp_id)
                    engine = self.liveness(s)
                    if engine["engine"] in ("silent", "stopped"):
                        progress += f" (the engine looks down: {engine['why']}, last heartbeat {engine['last_beat']})"
                    if progress != said:
                        self.err(f"waiting: {progress}")
                        said = progress
            except SyncError as e:  # the remote may be away for a while; keep waiting
                self.err(f"still waiting: {e}")
            finally:
                s.close()
            left = deadline - time.monotonic()
            if left <= 0:
                self.err(
                    f"no result for the MP sent in {sent[:12]} after {timeout:g} s; it stays sent. "
                    "Check `mp-engine status` on the engine host (is it running, halted or unable to push?)."
                )
                return ExitCode.SEND_TIMEOUT
            if stop.wait(min(poll, left)):
                return ExitCode.SEND_TIMEOUT

    def liveness(self, s: GitSession) -> dict:
        """The engine's heartbeat as the remote has it (sync/heartbeat.py), fetched anew."""
        ref = f"refs/remotes/origin/{HEARTBEAT_BRANCH}"
        got = s.status("fetch", "--quiet", "--no-tags", "origin", f"+refs/heads/{HEARTBEAT_BRANCH}:{ref}")[0] == 0
        return verdict(heartbeat.parse(s.run("log", "-1", "--format=%B", ref)) if got else None)

    def _find_result(self, s: GitSession, sent: str, sha: str) -> str | None:
        if not s.is_ancestor(sent, self.tracking):
            return None
        commits = s.run("log", "--reverse", "--format=%H", f"{sent}..{self.tracking}", "--", RESULT_PATH).split()
        for c in commits:
            blob = s.blob(c, RESULT_PATH)
            if blob is None:
                continue
            text = blob.decode("utf-8", errors="replace")
            if field_of(text, "MP-SHA256") == sha:
                return text
        return None


def send_mp(
    file: Path,
    repo: str,
    *,
    branch: str = "main",
    wait: bool = False,
    timeout: float = 600.0,
    poll: float = 2.0,
    force: bool = False,
    rerun: bool = False,
    echo: Callable[[str], None] = print,
    err: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> int:
    """The whole `send` command; returns its exit code (see the module docstring)."""
    data = file.read_bytes()
    try:
        mp = parse(data)
        if (mp.executor or "shell") == "shell":
            require_executable(mp)
    except InvalidMPError as e:
        err(f"{file}: invalid MP: {e.reason}" + (f" (line {e.line})" if e.line else ""))
        err(f"fix: {e.fix}")
        return ExitCode.MP_ERROR
    sender = Sender(repo, branch, echo, err)
    try:
        sent = sender.send(data, mp, force, rerun)
        if isinstance(sent, int):
            return sent
        if isinstance(sent, Already):
            echo(sent.say(mp.mp_id))
            if sent.what == "ran":  # its result is in: --wait has nothing more to wait for
                good = (sent.result or {}).get("status") == "COMPLETED"
                return ExitCode.OK if good or not wait else ExitCode.MP_ERROR
            if not wait:
                return ExitCode.OK
            sent = (sender.working_clone(), sent.commit)
        clone, commit = sent
        echo(f"sent {mp.mp_id} in {commit[:12]} to {repo} ({branch})")
        if not wait:
            return ExitCode.OK
        return sender.wait(clone, commit, (mp.mp_id, mp.sha256, "COMPLETED"), timeout, poll, stop or threading.Event())
    except SyncError as e:
        err(f"mp-engine send: {e}")
        return ExitCode.GIT
