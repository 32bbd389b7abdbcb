"""Git history as the queue: every commit that sets the inbox file to new content is one MP.

A pull brings the remote's commits into the working tree, where the inbox file holds only
the newest version. Before it does, `queue_arrivals()` reads the versions the incoming
commits wrote, in commit order, and queues (inbox/queue.py) each one the slot is about to
lose:
  - the MP waiting in the slot that the pull replaces (not the one running: it is the
    engine's already), queued as `slot`, so that it still runs from the slot if the pull
    fails;
  - each incoming version but the newest, which the slot takes (all of them when the
    newest commit deleted the file).
The engine runs the queue before the slot, so the MPs run one at a time in commit order.
"""

from __future__ import annotations

from mp_engine.inbox.header import sha256_hex
from mp_engine.inbox.queue import GIT, SLOT
from mp_engine.sync.context import PROCESSED_REF, SyncContext
from mp_engine.sync.session import GitSession
from mp_engine.sync.signatures import INBOX_PATH


def incoming_versions(s: GitSession, head: str, tip: str) -> list[tuple[str, bool]]:
    """(commit, whether it left the inbox file in place) for each commit reachable from
    `tip` but not from `head` that changed the inbox file, oldest first: one `git log`
    per pull (bench figure 2). The bytes are read only for the versions that are queued."""
    out = s.run(
        "log",
        "--reverse",
        "--topo-order",
        "--no-renames",
        "--format=%x1e%H",
        "--name-status",
        f"{head}..{tip}",
        "--",
        INBOX_PATH,
    )
    versions = []
    for record in out.split("\x1e")[1:]:
        commit, _, changes = record.partition("\n")
        versions.append((commit.strip(), not changes.strip().startswith("D")))
    return versions


def queue_arrivals(sync: SyncContext, s: GitSession, head: str, versions: list[tuple[str, bool]]) -> list[str]:
    """Queue what the slot is about to lose (see the module docstring); the ids queued."""
    inbox = sync.inbox
    if inbox is None or not versions:
        return []
    queue, added = inbox.queue, []
    waiting = waiting_in_slot(sync, s, head, versions)
    if waiting is not None:
        # Keyed by the last remote commit integrated, not by HEAD (issue #45): a pull that
        # failed on a full disk could not take back what it queued, the engine committed
        # meanwhile, and the retry queued the same waiting MP again under the new HEAD.
        # Only a pull that succeeds moves the processed commit; the bytes tell a version
        # dropped into the slot by hand since then from the one queued before.
        since = s.rev(PROCESSED_REF) or head
        q = queue.add(waiting, SLOT, commit=f"{since}:{sha256_hex(waiting)[:16]}:slot")
        if q is not None:
            added.append(q.id)
    lost = versions[:-1] if versions[-1][1] else versions  # the newest takes the slot
    for commit, present in lost:
        data = s.blob(commit, INBOX_PATH) if present else None
        if data is not None and (q := queue.add(data, GIT, commit=commit)) is not None:
            added.append(q.id)
    if added:
        sync.events.emit("inbox_queued", entries=added, pending=len(queue))
    return added


def waiting_in_slot(sync: SyncContext, s: GitSession, head: str, versions: list[tuple[str, bool]]) -> bytes | None:
    """The MP waiting in the slot, which this pull takes it from: the slot's bytes (None
    when it is empty, or holds the MP running). When the slot holds one of the incoming
    versions that HEAD does not have, a move cut short left it there (a full disk let git
    write the working tree, not HEAD: issue #45); this pull brings that version anyway, and
    queued as waiting too it ran twice. What waited is then HEAD's version."""
    inbox = sync.inbox
    assert inbox is not None
    slot = inbox.waiting_bytes()
    if slot is None:
        return None
    committed = s.blob(head, INBOX_PATH)
    if slot == committed or not any(present and s.blob(c, INBOX_PATH) == slot for c, present in versions):
        return slot
    if committed is None or sha256_hex(committed) == inbox.busy_sha:
        return None
    return committed
