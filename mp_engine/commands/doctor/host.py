"""Doctor's checks of the host: inotify, process guards, network file systems, the agent CLIs, disk."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from mp_engine.agent.api import CONFORMANCE, cli_of, installed_version
from mp_engine.commands.doctor.check import FAIL, OK, WARN, Check
from mp_engine.config.agent import AgentLevel
from mp_engine.config.load import Config
from mp_engine.core import pids
from mp_engine.core.disk import mount_of
from mp_engine.core.workspace import Workspace

NETWORK_FS = ("nfs", "nfs4", "cifs", "smb", "smb3", "smbfs", "fuse.sshfs", "9p", "afs", "ceph", "glusterfs")
MIN_FREE = 100 * 1024 * 1024  # below this a result or a state write may fail
LOW_FREE = 1024 * 1024 * 1024


def inotify(ws: Workspace, config: Config) -> Check:
    limit_file = Path("/proc/sys/fs/inotify/max_user_watches")
    if config.watch.mode == "polling":
        return Check("inotify", OK, "[watch] mode = polling: inotify is not used")
    if not limit_file.exists():
        return Check("inotify", OK, "no inotify on this system (the native observer uses the platform's own)")
    limit = int(limit_file.read_text().strip())
    dirs = _count_dirs(ws.root)
    # The engine watches one directory (Claude_Inbox/, not recursive); the limit is shared by
    # every program of this user, and editors or build watchers on the workspace need one per directory.
    if limit < max(8192, dirs):
        return Check(
            "inotify",
            WARN,
            f"fs.inotify.max_user_watches = {limit}, and the workspace alone has {dirs} directories; "
            "when it runs out the engine falls back to polling",
            "echo fs.inotify.max_user_watches=524288 | sudo tee /etc/sysctl.d/60-inotify.conf && sudo sysctl --system",
        )
    return Check(
        "inotify", OK, f"max_user_watches = {limit} (the workspace has {dirs} directories; the engine watches 1)"
    )


def process_guards(ws: Workspace, config: Config) -> Check:
    """The two Linux-only guards of the daemon (pids.py): what is lost without them."""
    if pids.LINUX:
        return Check(
            "process guards",
            OK,
            "Linux: the daemon is a child subreaper (escaped step processes die with their step) and not dumpable",
        )
    return Check(
        "process guards",
        WARN,
        "no prctl on this system: a step's process that leaves its group (setsid, a daemon) is not killed with the "
        "step, and another process of this user can read the daemon's environment (its held secrets)",
        "run steps that start background services only under `mp-engine run` on Linux, or keep secrets out of the "
        "daemon's environment",
    )


def _count_dirs(root: Path, cap: int = 200_000) -> int:
    count = 0
    for _dirpath, dirnames, _files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        count += 1
        if count >= cap:
            break
    return count


def mount_type(path: Path, mounts: Path = Path("/proc/mounts")) -> str | None:
    """The file-system type of the mount holding `path` (longest mount-point prefix)."""
    mount = mount_of(path, mounts)
    return mount[1] if mount else None


def network_fs(ws: Workspace, config: Config) -> Check:
    fstype = mount_type(ws.root)
    if fstype is None:
        return Check("filesystem", OK, "file-system type unknown here (no /proc/mounts)")
    network = fstype in NETWORK_FS or fstype.startswith(("nfs", "fuse.sshfs", "smb"))
    if network and config.watch.mode != "polling":
        return Check(
            "filesystem",
            WARN,
            f"the workspace is on {fstype}: inotify does not see writes made by other machines",
            'set [watch] mode = "polling" in mp-engine.toml',
        )
    return Check("filesystem", OK, f"{fstype}" + (" with polling" if network else " (local)"))


def missing_commands(levels: Iterable[AgentLevel]) -> list[str]:
    """`name: command` of each level that calls an agent whose command is not on PATH."""
    return [f"{lv.name}: {lv.argv[0]}" for lv in levels if not lv.hard_gate and shutil.which(lv.argv[0]) is None]


def agent_chain(ws: Workspace, config: Config) -> Check:
    levels = [lv for lv in config.agent.levels if not lv.hard_gate]
    if levels and config.fleet.enabled:
        return Check(
            "agent chain",
            OK,
            f"{len(levels)} level(s) run on the fleet's workers, with their own CLIs and credentials (the fleet check)",
        )
    if not levels:
        return Check("agent chain", OK, "no agent levels configured (agent MPs end in NEED_INFO)")
    missing = missing_commands(levels)
    if missing:
        return Check(
            "agent chain",
            FAIL,
            f"not found on PATH: {', '.join(missing)}",
            "install them, or give absolute paths in [[agent.levels]] argv (the service's PATH is set in its unit)",
        )
    untested = []
    for lv in levels:
        cli = cli_of(lv.argv[0])
        if cli is None:
            continue
        have = installed_version(shutil.which(lv.argv[0]) or lv.argv[0])
        passed = CONFORMANCE.get(cli, ())
        if have not in passed:
            on = f"the conformance suite passed on {', '.join(passed)}" if passed else "not yet conformance-tested"
            untested.append(f"{lv.name}: {cli} {have or '(version unknown)'} ({on})")
    found = f"{len(levels)} level(s) found on PATH: {', '.join(lv.argv[0] for lv in levels)}"
    if untested:
        return Check(
            "agent chain",
            WARN,
            f"{found}; versions not proven: {'; '.join(untested)}",
            "pin a version the suite passed on, or run it against yours: MP_ENGINE_CONFORMANCE_<CLI>=<version> "
            ".venv/bin/python -m pytest tests/conformance (docs/AGENT.md, Conformance)",
        )
    return Check("agent chain", OK, found)


def disk(ws: Workspace, config: Config) -> Check:
    usage = shutil.disk_usage(ws.root)
    free = usage.free
    human = f"{free / 1024**3:.1f} GiB free of {usage.total / 1024**3:.1f} GiB"
    if free < MIN_FREE:
        return Check("disk", FAIL, human, f"free space on the file system of {ws.root} (old runs: SYSTEM/runs/)")
    if free < LOW_FREE or free < usage.total * 0.05:
        return Check("disk", WARN, human, f"free space soon; old runs are in {ws.rel(ws.runs_dir)}/")
    return Check("disk", OK, human)
