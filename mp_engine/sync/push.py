"""Pushing: `git push --porcelain` with every way it can fail checked, and a bounded,
jittered retry that fetches, verifies and rebases when the remote moved meanwhile.

A push the remote refuses for good (a pre-receive hook, a file too large, a protected
branch, no permission) is not retried at once: the commits stay local, the channel is
blocked with the remote's own message (`status`, `doctor` and every later result show it),
and the push is tried again when the remote's branch moves, when the engine restarts, and
after `[git] refused_retry` seconds (30), doubling up to REFUSED_RETRY_MAX (a refusal that
lasts a while, a quota or a hook being fixed, must not leave the results local while nobody
pushes)."""

from __future__ import annotations

import re
import time
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

import mp_engine.sync.pull as pull
from mp_engine.core.errors import RemoteUnreachable, SyncError
from mp_engine.core.gitcmd import failure
from mp_engine.sync.context import PROCESSED_REF, SyncContext
from mp_engine.sync.pull import SyncOutcome
from mp_engine.sync.session import GitSession


class PushRejected(SyncError):
    """The push was refused because the remote has commits we do not (retried)."""


class PushRefused(SyncError):
    """The remote refused the push for good (a hook, a size limit, a protected branch, a
    permission): retrying the same commits cannot succeed."""


# What remotes say when they refuse a push on purpose (git's own `[remote rejected]`, and
# GitHub's / GitLab's wording for size limits, protected branches and permissions).
LOST_RACE_RE = re.compile(r"cannot lock ref .*is at [0-9a-f]+ but expected|incorrect old value provided")
REFUSED_RE = re.compile(
    r"\[remote rejected\]|hook declined|protected branch|GH00\d|large files? detected|file size limit|"
    r"not allowed to (push|force)|permission to \S+ denied|returned error: 403|insufficient permission",
    re.I,
)
REFUSED_RETRY_MAX = 1800.0  # the longest wait before a refused push is tried again (issue #45)


def _refusal(summary: str, err: str) -> PushRefused:
    said = [line.removeprefix("remote:").strip() for line in err.splitlines() if line.startswith("remote:")]
    said = [line for line in said if line]
    message = "; ".join([summary.strip(), *said[:6]]) if summary else "; ".join(said[:6]) or err.strip()
    return PushRefused(message[:1000])


def push_checked(s: GitSession, remote_name: str, branch: str, timeout: float) -> None:
    """`git push --porcelain REMOTE HEAD:BRANCH`; raises `PushRejected` when the remote has
    commits we lack, `SyncError` for any other refusal.

    The porcelain output is git's stable machine format: one `FLAG<TAB>FROM:TO<TAB>SUMMARY`
    line per ref, `!` for a ref that was not updated. Read here rather than through
    GitPython's `Remote.push`, which does not raise on a rejected push
    (gitpython-developers/GitPython#621)."""
    refspec = f"HEAD:refs/heads/{branch}"
    r = s.result("push", "--porcelain", remote_name, refspec, timeout=timeout)
    results = [line.split("\t") for line in r.out.splitlines() if line.count("\t") >= 2]
    for flag, _ref, summary, *_ in results:
        if flag == "!":
            # A push that lost a race at the remote (another push updated the branch between
            # its check and its update: git's "cannot lock ref ... is at X but expected Y")
            # is a rejection like any other: fetch, rebase and push again.
            if summary.startswith("[rejected]") or LOST_RACE_RE.search(r.err):
                raise PushRejected(f"push of {branch} rejected: {summary}")
            raise _refusal(summary, r.err)
    if r.code != 0:
        if re.search(r"\[rejected\]|non-fast-forward|fetch first", r.err):
            raise PushRejected(str(failure(r)))
        if REFUSED_RE.search(r.err):
            raise _refusal("", r.err)
        raise failure(r)
    if not results:
        raise RemoteUnreachable(f"`git push {remote_name} {refspec}` reported no result; will retry.")


def unpushed(sync: SyncContext, s: GitSession) -> int:
    if s.rev("HEAD") is None:
        return 0
    return s.count(f"{sync.tracking}..HEAD") if s.rev(sync.tracking) else s.count("HEAD")


def retry_due(blocked: dict[str, Any], now: float, first: float = 30.0) -> bool:
    """Whether a refused push is tried again at `now`, `first` seconds after the first
    refusal, doubling (other blocks wait for the remote)."""
    if blocked.get("kind") != "push_refused":
        return False
    delay = min(first * 2 ** int(blocked.get("tries", 0)), max(REFUSED_RETRY_MAX, first))
    return now >= float(blocked.get("at", 0.0)) + delay


def push(sync: SyncContext, s: GitSession, out: SyncOutcome, allowed_signers: str) -> None:
    """Push HEAD; on rejection fetch, verify, rebase and retry with bounded backoff."""
    head = s.rev("HEAD")
    if not sync.cfg.push or head is None or head == s.rev(sync.tracking):
        return
    blocked = sync.store.blocked()
    if blocked and not retry_due(blocked, time.time(), sync.cfg.refused_retry):
        return
    try:
        for attempt in Retrying(
            stop=stop_after_attempt(sync.cfg.push_attempts),
            wait=wait_exponential_jitter(
                multiplier=0.05, max=sync.cfg.push_backoff_max, jitter=sync.cfg.push_backoff_max / 10
            ),
            retry=retry_if_exception_type(PushRejected),
            reraise=True,
        ):
            with attempt:
                try:
                    push_checked(s, sync.remote_name, sync.cfg.branch, sync.cfg.timeout)
                except PushRejected:
                    remote_sha = pull.fetch(sync, s)[0]
                    if remote_sha is not None:
                        step = pull.integrate(sync, s, remote_sha, allowed_signers)
                        out.integrated |= step.integrated
                        if step.problem is not None:
                            out.problem = step.problem
                            return
                    raise
    except PushRejected as e:
        sync.events.emit("sync_push_deferred", error=f"still rejected after {sync.cfg.push_attempts} attempts: {e}")
        return
    except PushRefused as e:
        block_refused(sync, s, str(e), tries=int(blocked.get("tries", -1)) + 1 if blocked else 0)
        return
    head = s.rev("HEAD")
    assert head is not None
    s.update_refs({sync.tracking: head, PROCESSED_REF: head})
    if blocked:
        sync.store.save({**sync.store.load(), "blocked": None})
        sync.events.emit("sync_unblocked", reason="the refused push was tried again and went through")
    sync.events.emit("sync_pushed", branch=sync.cfg.branch, head=head[:12])


def block_refused(sync: SyncContext, s: GitSession, message: str, tries: int = 0) -> None:
    """Stop pushing until the remote moves, a restart, or the retry is due: the refusal is
    remembered with the remote tip it was made against, when, and how often, and reported."""
    data = sync.store.load()
    remote = s.rev(sync.tracking) or ""
    data["blocked"] = {"kind": "push_refused", "remote": remote, "message": message, "at": time.time(), "tries": tries}
    sync.store.save(data)
    sync.events.emit("sync_push_refused", message=message, unpushed=unpushed(sync, s))


def refusal_notice(blocked: dict | None) -> str | None:
    """The line `status`, `doctor` and results show for a refused push, or for git stopped
    by a changed .git/config; None otherwise."""
    if blocked and blocked.get("kind") == "git_config":
        return f"git is stopped: {blocked.get('message', '')}"
    if not blocked or blocked.get("kind") != "push_refused":
        return None
    return f"push refused by the remote: {blocked.get('message', '')}"


def push_side_branch(sync: SyncContext, s: GitSession) -> None:
    """Keep the engine's commits that a conflict or an unsigned range holds back on
    `mp-engine/blocked/<branch>`, where the orchestrator can read the result."""
    code, _o, err = s.status("push", "--force", "--quiet", sync.remote_name, f"HEAD:refs/heads/{sync.side_branch}")
    if code != 0:
        sync.events.emit("sync_failed", stage="push side branch", error=err.strip())
