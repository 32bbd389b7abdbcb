"""`mp-engine send --cancel MP-ID` and `send --answer MP-ID FILE`: requests about an MP the
engine already has, committed beside the inbox slot (`Claude_Inbox/cancel_request.txt`,
`Claude_Inbox/answer.txt`) through the same working clone and push as `send`."""

from __future__ import annotations

import threading
from collections.abc import Callable

from mp_engine.client.channel import Already
from mp_engine.client.send import Sender
from mp_engine.core.errors import SyncError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.inbox.header import MP_ID_RE


def send_answer(
    mp_id: str,
    text: str,
    repo: str,
    *,
    mt: str | None = None,
    branch: str = "main",
    wait: bool = False,
    timeout: float = 600.0,
    poll: float = 2.0,
    echo: Callable[[str], None] = print,
    err: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> int:
    """`send --answer MP-ID FILE`: commit the answer to the MP the engine is halted on
    because it asked; with `--wait`, wait for the answered run's result (exit 0 COMPLETED)."""
    if not MP_ID_RE.match(mp_id):
        err(f"mp-engine send --answer: {mp_id!r} is not an MP id; give one like MP-1.4")
        return ExitCode.USAGE
    if not text.strip():
        err("mp-engine send --answer: the answer file is empty")
        return ExitCode.USAGE
    sender = Sender(repo, branch, echo, err)
    try:
        sent = sender.answer(mp_id, text, mt)
        if isinstance(sent, int):
            return sent
        clone, commit, sha256 = sent
        echo(f"sent the answer to {mp_id} in {commit[:12]} to {repo} ({branch}); its run goes on")
        if not wait or sha256 is None:
            return ExitCode.OK
        return sender.wait(clone, commit, (mp_id, sha256, "COMPLETED"), timeout, poll, stop or threading.Event())
    except SyncError as e:
        err(f"mp-engine send: {e}")
        return ExitCode.GIT


def send_cancel(
    mp_id: str,
    repo: str,
    *,
    branch: str = "main",
    wait: bool = False,
    timeout: float = 600.0,
    poll: float = 2.0,
    echo: Callable[[str], None] = print,
    err: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> int:
    """`send --cancel MP-ID`: commit a cancel request naming it; with `--wait`, wait for
    the MP's CANCELLED result (exit 0; 1 when it ended otherwise)."""
    if not MP_ID_RE.match(mp_id):
        err(f"mp-engine send --cancel: {mp_id!r} is not an MP id; give one like MP-1.4")
        return ExitCode.USAGE
    sender = Sender(repo, branch, echo, err)
    try:
        sent = sender.cancel(mp_id)
        if isinstance(sent, int):
            return sent
        if isinstance(sent, Already):  # nothing to stop: --wait exits by the result it already has
            echo(sent.say(mp_id))
            return ExitCode.OK if not wait or (sent.result or {}).get("status") == "CANCELLED" else ExitCode.MP_ERROR
        clone, commit, sha256 = sent
        echo(f"sent a cancel request for {mp_id} in {commit[:12]} to {repo} ({branch})")
        if not wait:
            return ExitCode.OK
        if sha256 is None:
            err(f"not waiting: {mp_id} is not in the remote's inbox, so no result will name it")
            return ExitCode.MP_ERROR
        return sender.wait(clone, commit, (mp_id, sha256, "CANCELLED"), timeout, poll, stop or threading.Event())
    except SyncError as e:
        err(f"mp-engine send: {e}")
        return ExitCode.GIT
