"""Releasing the inbox slot when a run ends: take the run's MP out of
`Claude_Inbox/incoming_microproject.txt`, leaving any newer MP that replaced it.

The entry is first renamed aside (inside the inbox, so watchers see a paired move, not a
lone IN_MOVED_FROM that watchdog holds back for 0.5 s) and only then compared, so a newer
MP renamed in between a check and a delete is never the one deleted. Idempotent: a crash
at any point is finished when the run's finalize runs again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import sha256_file
from mp_engine.inbox.intake import CLAIMED_PREFIX, Inbox


def release(
    inbox: Inbox,
    *,
    run_id: str,
    how: str,
    sha256: str,
    keep_at: Path,
    emit: Callable[..., Any],
) -> None:
    """Release the slot run `run_id` took. `how` (the ledger's `inbox_entry`): "delete" the
    MP (it is archived as mp.txt), "archive" a bad entry into `keep_at`, or leave the inbox
    "untouched" (the run did not come from the slot). A different MP found in the slot
    stays there; when an even newer one took the slot meanwhile, it is kept at `keep_at`."""
    ws = inbox.ws
    if how == "untouched" or os.path.lexists(keep_at):
        return
    aside = ws.inbox_dir / f"{CLAIMED_PREFIX}{run_id}"
    if not os.path.lexists(aside):
        if inbox.lstat_entry() is None:
            return
        try:
            os.rename(ws.inbox_file, aside)
        except FileNotFoundError:
            return
    regular = os.path.isfile(aside) and not os.path.islink(aside)
    archive = how == "archive"
    # Ours: the bad entry this run was about (archive), or a file with the bytes we ran.
    if (archive and not regular) or (regular and sha256_file(aside) == sha256):
        inbox.forget()
        if archive:
            os.rename(aside, keep_at)
        else:
            os.unlink(aside)  # the MP itself is archived as mp.txt
        return
    # A different MP arrived during the run: put it back, never over an even newer one.
    try:
        if regular:
            os.link(aside, ws.inbox_file, follow_symlinks=False)  # fails if the slot is taken
        elif os.path.lexists(ws.inbox_file):  # a directory or link cannot be hard-linked
            raise FileExistsError(ws.inbox_file)
        else:
            os.rename(aside, ws.inbox_file)
    except FileExistsError:
        os.rename(aside, keep_at)
        emit(
            "inbox_superseded",
            run=run_id,
            kept=ws.rel(keep_at),
            detail="two newer MPs arrived during the run; the newest is in the inbox, the other is kept here",
        )
        return
    if os.path.lexists(aside):
        os.unlink(aside)
    emit("inbox_replaced", run=run_id, detail="a different MP arrived during the run; it stays in the inbox")
