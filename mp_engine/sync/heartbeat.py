"""The heartbeat: how the remote tells an engine that is down from one that is idle.

An idle engine commits nothing, so the channel branch cannot say whether anyone is
listening. Every `[git] heartbeat_interval` seconds (the first poll after a start, then
while idle and while an MP runs) the engine force-pushes one small commit to the branch
`mp-engine/heartbeat` (not the channel branch, whose history gets no commit from it). The
commit has the empty tree and no parent; its message is one JSON document:

    {"schema": "mp-engine/heartbeat/1", "at": "<UTC ISO-8601>", "interval": 300,
     "status": "ONLINE", "current": "IDLE", "run_id": null, "host": "...", "pid": 1234}

A clean stop pushes one last beat with `"status": "stopped"`. A reader (`send --wait`,
`status --remote`, an orchestrator through GitHub's API) judges it with `verdict`: `up`
while the last beat is younger than 2 x interval + min(interval, 60 s), `stopped` after
a clean stop, `silent` otherwise (crashed, killed, host down, cut off, or git stopped by
a changed .git/config), `unknown` when there is no heartbeat branch (heartbeats off, or
an older engine).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mp_engine.core.atomic import atomic_write
from mp_engine.core.clock import now_iso, parse_iso
from mp_engine.core.errors import SyncError
from mp_engine.core.gitcmd import git
from mp_engine.core.pids import hostname
from mp_engine.sync.context import SyncContext

HEARTBEAT_BRANCH = "mp-engine/heartbeat"
LAST_BEAT_FILE = "last_heartbeat"  # in SYSTEM/.engine/: when a beat was last pushed
SCHEMA = "mp-engine/heartbeat/1"
GRACE = 60.0  # at most this is added to twice the interval before a beat counts as missed


class Heartbeat:
    def __init__(self, sync: SyncContext, interval: float):
        self.sync = sync
        self.interval = interval
        self._next = 0.0
        self._lock = threading.Lock()  # the main loop and the cancel watch's thread both beat
        self._failing = False  # a failure is reported once until a beat gets through
        self.sent = 0
        # What a run is doing, for the beat (`{"step": ...}` or `{"micro_task": ...}`), set
        # by the daemon (daemon/health.py: the stages below it cannot read a run's progress).
        self.progress: Callable[[str], dict[str, Any] | None] | None = None

    def due(self) -> bool:
        return self.interval > 0 and self.sync.cfg.push and time.monotonic() >= self._next

    def _document(self, status: str | None) -> dict[str, Any]:
        try:
            state = json.loads(self.sync.ws.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        doc = {
            "schema": SCHEMA,
            "at": now_iso(),
            "interval": self.interval,
            "status": status or state.get("status"),
            "current": state.get("current"),
            "run_id": state.get("run_id"),
            "host": hostname(),
            "pid": os.getpid(),
        }
        # What the remote cannot show by itself: commits held back, and why.
        blocked = self.sync.store.blocked()
        if blocked:
            doc["blocked"] = {"kind": blocked.get("kind"), "message": str(blocked.get("message", ""))[:300]}
        ahead = git(
            self.sync.ws.root,
            "rev-list",
            "--count",
            f"refs/remotes/{self.sync.remote_name}/{self.sync.cfg.branch}..HEAD",
            check=False,
            timeout=self.sync.cfg.timeout,
        )
        if ahead.ok and ahead.out.strip().isdigit():
            doc["unpushed"] = int(ahead.out.strip())
        if self.progress is not None and state.get("run_id") and not status:
            try:
                doc.update(self.progress(str(state["run_id"])) or {})
            except (OSError, ValueError):  # a beat never fails for its progress line
                pass
        return doc

    def beat(self, *, stopped: bool = False) -> bool:
        """Push a beat when one is due (or the last one, `stopped`); never raises."""
        if not (self.due() or (stopped and self.sent and self.interval > 0)):
            return False
        try:
            return self._beat(stopped)
        except SyncError as e:  # a changed .git/config stops git: no beat, so the remote sees silence
            self._next = time.monotonic() + self.interval
            if not self._failing:
                self.sync.events.emit("heartbeat_failed", error=str(e)[:600], branch=HEARTBEAT_BRANCH)
            self._failing = True
            return False

    def _beat(self, stopped: bool) -> bool:
        with self._lock:
            self._next = time.monotonic() + self.interval
            root, t = self.sync.ws.root, self.sync.cfg.timeout
            doc = json.dumps(self._document("stopped" if stopped else None), sort_keys=True)
            ident = ["-c", "user.name=mp-engine", "-c", "user.email=mp-engine@localhost"]
            tree = git(root, "mktree", input="", check=False, timeout=t)
            commit = git(root, *ident, "commit-tree", tree.out.strip(), "-m", doc, check=False, timeout=t)
            pushed = commit.ok and git(
                root,
                "push",
                "--force",
                "--quiet",
                self.sync.remote_name,
                f"{commit.out.strip()}:refs/heads/{HEARTBEAT_BRANCH}",
                check=False,
                timeout=t,
            )
            if pushed and pushed.ok:
                self.sent += 1
                # Where the dashboard reads the heartbeat's age (the remote has it too).
                with contextlib.suppress(OSError):  # a beat never fails for its local note
                    atomic_write(self.sync.ws.local_dir / LAST_BEAT_FILE, json.loads(doc)["at"].encode(), durable=False)
                self._failing = False
                return True
            if not self._failing:
                why = (pushed.err if pushed else commit.err or tree.err).strip()[:600]
                self.sync.events.emit("heartbeat_failed", error=why, branch=HEARTBEAT_BRANCH)
            self._failing = True
            return False


def last_beat_at(local_dir: Path) -> str | None:
    """When this engine last pushed a beat (UTC ISO), or None."""
    try:
        return (local_dir / LAST_BEAT_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def parse(message: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(message)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None


def verdict(doc: dict[str, Any] | None, now: datetime | None = None) -> dict[str, Any]:
    """`{"engine": up|stopped|silent|unknown, "last_beat", "age", ...}` for a beat read from
    the remote (see the module docstring)."""
    if doc is None:
        return {"engine": "unknown", "why": f"no heartbeat on branch {HEARTBEAT_BRANCH}"}
    try:
        age = ((now or datetime.now(UTC)) - parse_iso(str(doc.get("at")))).total_seconds()
    except ValueError:
        return {"engine": "unknown", "why": "the heartbeat has no readable time"}
    interval = float(doc.get("interval") or 0)
    base = {"last_beat": doc.get("at"), "age": round(age, 1), "host": doc.get("host"), "pid": doc.get("pid")}
    if doc.get("status") == "stopped":
        return {"engine": "stopped", **base, "why": "the engine stopped cleanly"}
    if age <= 2 * interval + min(GRACE, interval):
        keys = ("run_id", "step", "micro_task", "micro_tasks", "pull_request", "blocked", "unpushed")
        doing = {k: doc[k] for k in keys if doc.get(k) is not None}
        return {"engine": "up", **base, "status": doc.get("status"), "current": doc.get("current"), **doing}
    return {"engine": "silent", **base, "why": f"no heartbeat for {int(age)} s (every {interval:g} s expected)"}
