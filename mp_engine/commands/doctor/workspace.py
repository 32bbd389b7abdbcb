"""Doctor's checks of the workspace itself: permissions, the state file, stale runs."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from mp_engine.commands.doctor.check import FAIL, OK, WARN, Check
from mp_engine.config.load import Config
from mp_engine.core.errors import StateError
from mp_engine.core.events import EventLog
from mp_engine.core.lock import WorkspaceLock, daemon_alive, daemon_owner
from mp_engine.core.pids import gone_here
from mp_engine.core.workspace import Workspace
from mp_engine.record.state import StateStore


def workspace(ws: Workspace) -> Check:
    """Every directory the engine writes must be writable; a world-writable inbox lets any
    local user run commands with the engine's rights."""
    not_writable = [
        ws.rel(p) or "." for p in (ws.root, ws.inbox_dir, ws.system_dir, ws.runs_dir) if p.exists() and not _writable(p)
    ]
    if not_writable:
        return Check(
            "workspace",
            FAIL,
            f"{ws.root}: not writable by this user: {', '.join(not_writable)}",
            f"run as the workspace's owner, or `chown -R {os.getuid()} {ws.root}`",
        )
    mode = os.stat(ws.inbox_dir).st_mode
    if mode & stat.S_IWOTH:
        return Check(
            "workspace",
            WARN,
            f"{ws.rel(ws.inbox_dir)} is world-writable: any local user can run commands as the engine",
            f"chmod o-w {ws.inbox_dir}",
        )
    return Check("workspace", OK, f"{ws.root}: layout complete and writable")


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def state_file(ws: Workspace, config: Config) -> Check:
    try:
        state = StateStore(ws.state_file, EventLog(ws.events_file)).read()
    except StateError as e:
        return Check(
            "state", FAIL, str(e), f"restore {ws.state_file.name} from git, or re-create it with `mp-engine init`"
        )
    halted = f", halted on {state.halt.mp_id}" if state.halt else ""
    return Check("state", OK, f"{ws.state_file.name} is valid (status {state.status.value}{halted})")


def stale_run(ws: Workspace, config: Config) -> Check:
    """A lock owner or a RUNNING state whose process is gone (a crash, a kill -9)."""
    owner = WorkspaceLock(ws.lock_file, 1).owner()
    if owner is not None and gone_here(owner):
        return Check(
            "lock",
            WARN,
            f"the lock owner record names pid {owner.get('pid')} ({owner.get('purpose')}), which is gone",
            "harmless (the kernel freed the lock); the next engine start replaces the record",
        )
    try:
        state = json.loads(ws.state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Check("lock", OK, "no lock held")
    daemon = state.get("daemon") or {}
    if daemon_alive(ws.daemon_lock_file):  # the kernel's word: the holder of daemon.lock
        o = daemon_owner(ws.daemon_lock_file) or {}
        return Check(
            "lock", OK, f"daemon running: pid {o.get('pid')} on {o.get('host')}, started {o.get('started_at')}"
        )
    if state.get("status") == "RUNNING" and gone_here(daemon):
        return Check(
            "lock",
            WARN,
            f"stale RUNNING state: engine pid {daemon.get('pid')} is gone with run {state.get('run_id')} open",
            "start the engine (`mp-engine run` or the service); it resumes the run from its ledger",
        )
    if state.get("status") in ("ONLINE", "ERROR") and gone_here(daemon):
        return Check(
            "lock",
            FAIL,
            f"the state says {state.get('status')}, but its daemon (pid {daemon.get('pid')}) is not running: "
            "it crashed or was killed",
            "start the engine again (`mp-engine run` or `systemctl restart mp-engine`)",
        )
    if owner:
        return Check("lock", OK, f"held by pid {owner.get('pid')} on {owner.get('host')} for {owner.get('purpose')}")
    return Check("lock", OK, "no stale lock or RUNNING state")


def stop_file(ws: Workspace, config: Config) -> Check:
    """SYSTEM/STOP ends every agent MP with BACKPRESSURE while it exists (docs/AGENT.md)."""
    path = ws.stop_file
    if path.exists():
        return Check(
            "stop file",
            WARN,
            f"{ws.rel(path)} exists: agent MPs end BACKPRESSURE at once until it is removed",
            f"rm {path} when the downstream system can take work again",
        )
    return Check("stop file", OK, "no SYSTEM/STOP")
