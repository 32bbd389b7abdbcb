"""The queue: versions of the inbox file that arrived but no longer sit in the slot.

The inbox file is one slot, but MPs can arrive faster than they run:
  - over git, every commit that sets `Claude_Inbox/incoming_microproject.txt` to new
    content is one MP (docs/PROTOCOL.md §2). When several arrive between two polls, or
    one arrives while another waits in the slot, the pull queues each older version here
    (kind `git`) before the slot takes the newest; they run first, in commit order;
  - an issue taken from a forge (`[repos.NAME] issues_label`) becomes an MP queued here
    (kind `issue`), and runs from the queue like a `git` one;
  - locally, a version a watcher saw complete while the engine was busy (kind `seen`),
    or one the engine held during a halt, is queued so that it cannot vanish: if it is
    still in the slot when its turn comes it runs from there, otherwise it was replaced
    before it ran and ends with a SUPERSEDED result.

Host-local (`SYSTEM/.engine/queue/`): each version's bytes in a file of its own, written
durably before `queue.json`, the index, is replaced (atomically, durably). A crash
between the two leaves an unreferenced file, removed on the next write. The index also
remembers the commits already queued once, so a pull that is repeated after a crash or a
failed integration queues nothing twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from mp_engine.core.atomic import atomic_write, atomic_write_json
from mp_engine.core.clock import now_iso
from mp_engine.inbox.header import sha256_hex

GIT = "git"  # an older version from git history: runs, in commit order
SLOT = "slot"  # the version a pull took out of the slot: runs from the slot if still there
SEEN = "seen"  # a version seen locally: runs from the slot if still there, else SUPERSEDED
ISSUE = "issue"  # an MP made from an issue (pipeline/issuing.py): runs from the queue, like `git`
FROM_QUEUE = (GIT, ISSUE)  # the kinds that run from the queue, never from the slot
KEEP_COMMITS = 500  # queued commits remembered after they left the queue


@dataclass(frozen=True)
class Queued:
    """One queued version of the inbox file."""

    id: str
    kind: str  # git | slot | seen
    sha256: str
    commit: str | None
    observed_at: str
    path: Path

    def data(self) -> bytes:
        return self.path.read_bytes()

    @property
    def source(self) -> str:
        """What a run taken from this entry records as where its MP came from."""
        return f"queue:{self.id}"


class MPQueue:
    """See the module docstring. Thread-safe: a watcher thread adds while the engine runs."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.index = directory / "queue.json"
        self._lock = threading.Lock()
        self._count: int | None = None  # entries, once known (this process is the writer)

    def _load(self) -> dict:
        try:
            data = json.loads(self.index.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"next": 1, "entries": [], "commits": []}
        except (OSError, ValueError):
            # A host-local index that does not parse (a disk error): start again, and
            # keep the MP bytes, which stay on disk for the operator.
            return {"next": 1, "entries": [], "commits": []}
        data.setdefault("next", 1)
        data.setdefault("entries", [])
        data.setdefault("commits", [])
        return data

    def _save(self, data: dict) -> None:
        data["commits"] = data["commits"][-KEEP_COMMITS:]
        atomic_write_json(self.index, data)
        self._count = len(data["entries"])

    def _entry(self, e: dict) -> Queued:
        return Queued(
            e["id"], e["kind"], e["sha256"], e.get("commit"), e.get("observed_at", ""), self.dir / f"{e['id']}.mp"
        )

    def entries(self) -> list[Queued]:
        """The queued versions, oldest first. Cheap when the queue was never used."""
        if not self.index.exists():
            return []
        with self._lock:
            return [self._entry(e) for e in self._load()["entries"]]

    def __len__(self) -> int:
        if self._count is None:
            self._count = len(self.entries())
        return self._count

    def add(self, data: bytes, kind: str, commit: str | None = None) -> Queued | None:
        """Queue `data`; None when it is already queued (a `seen` copy of a version that
        git then queues takes git's kind) or its commit was queued before."""
        sha = sha256_hex(data)
        with self._lock:
            index = self._load()
            if commit is not None and commit in index["commits"]:
                return None
            for e in index["entries"]:
                if e["sha256"] == sha and (e["kind"] == SEEN or kind == SEEN):
                    if kind != SEEN and e["kind"] == SEEN:
                        e.update(kind=kind, commit=commit)
                        index["commits"].append(commit)
                        self._save(index)
                    return None
            entry_id = f"{index['next']:06d}"
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write(self.dir / f"{entry_id}.mp", data)
            e = {"id": entry_id, "kind": kind, "sha256": sha, "commit": commit, "observed_at": now_iso()}
            index["next"] += 1
            index["entries"].append(e)
            if commit is not None:
                index["commits"].append(commit)
            self._save(index)
            self._sweep(index)
            return self._entry(e)

    def remove(self, entry_id: str) -> None:
        """Take an entry out (it ran, or its result is recorded). Idempotent."""
        with self._lock:
            index = self._load()
            kept = [e for e in index["entries"] if e["id"] != entry_id]
            if len(kept) != len(index["entries"]):
                index["entries"] = kept
                self._save(index)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.dir / f"{entry_id}.mp")

    def rollback(self, entry_ids: list[str]) -> None:
        """Undo `add`s whose pull was not integrated: the entries and their commits go, so
        the next attempt queues them again."""
        if not entry_ids:
            return
        with self._lock:
            index = self._load()
            gone = [e for e in index["entries"] if e["id"] in entry_ids]
            index["entries"] = [e for e in index["entries"] if e["id"] not in entry_ids]
            commits = {e.get("commit") for e in gone}
            index["commits"] = [cm for cm in index["commits"] if cm not in commits]
            self._save(index)
            self._sweep(index)

    def discard_seen(self, sha256: str) -> None:
        """Drop `seen` entries of a version that is being run from the slot."""
        for q in self.entries():
            if q.kind == SEEN and q.sha256 == sha256:
                self.remove(q.id)

    def _sweep(self, index: dict) -> None:
        """Remove bytes files no entry refers to (a crash between the two writes)."""
        live = {f"{e['id']}.mp" for e in index["entries"]}
        for name in os.listdir(self.dir):
            if name.endswith(".mp") and name not in live:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.dir / name)
