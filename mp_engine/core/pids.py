"""Questions about other processes on this host.

psutil answers them the same way on Linux, macOS and the BSDs (the launchd service makes
macOS a target): a process's creation time, status, environment and children (on Linux the
children come from the kernel's own list: the daemon asks before every pass, see `children`).
psutil is imported by the functions that use it: `atomic.py` needs only `pid_alive`, and
`status` must not pay 17 ms for an import it does not use (bench figure 8). The two
Linux-only `prctl` calls (a child subreaper, a non-dumpable daemon) stay behind one
platform check, `_prctl`; elsewhere they return False and `doctor` says what is lost.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

LINUX = sys.platform.startswith("linux")


def pid_alive(pid: object) -> bool:
    """True if a process with this pid exists (one of another user counts too)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def hostname() -> str:
    """This host's name, as `socket.gethostname()` gives it (without importing socket)."""
    return os.uname().nodename


def gone_here(record: Mapping[str, object] | None) -> bool:
    """True when `record` (`{pid, host}`: a daemon or a lock owner) names a process on this
    host that is no longer running; False for another host's, or no record."""
    if not record:
        return False
    return record.get("host") == hostname() and not pid_alive(record.get("pid"))


@dataclass(frozen=True)
class Proc:
    """One process as recovery and group stops see it."""

    pid: int
    pgid: int
    started: float  # creation time, seconds since the epoch (psutil): tells a reused pid apart
    zombie: bool


def proc(pid: int) -> Proc | None:
    """The process `pid`, or None when there is none (or it vanished while being read)."""
    import psutil

    try:
        p = psutil.Process(pid)
        with p.oneshot():
            started, status = p.create_time(), p.status()
        pgid = os.getpgid(pid)
    except (psutil.Error, ProcessLookupError, PermissionError):
        return None
    return Proc(pid, pgid, started, status == psutil.STATUS_ZOMBIE)


def proc_stat(pid: int) -> tuple[int, float] | None:
    """(process group, creation time) of `pid`, or None."""
    p = proc(pid)
    return (p.pgid, p.started) if p else None


def is_zombie(pid: int) -> bool:
    p = proc(pid)
    return p is not None and p.zombie


def group(pgid: int) -> list[Proc]:
    """Every process of group `pgid` (zombies included: `Proc.zombie` says)."""
    import psutil

    found = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) != pgid:
                continue
        except (ProcessLookupError, PermissionError):
            continue
        p = proc(pid)
        if p is not None and p.pgid == pgid:
            found.append(p)
    return found


def environ_has(pid: int, entries: list[str]) -> bool:
    """True when the environment of `pid` holds every `NAME=value` of `entries` (only a
    process of the same user, not marked non-dumpable, can be read)."""
    import psutil

    try:
        env = psutil.Process(pid).environ()
    except psutil.Error:
        return False
    for entry in entries:
        name, _, value = entry.partition("=")
        if env.get(name) != value:
            return False
    return True


def commands_of_user(*words: str) -> list[tuple[int, list[str], dict[str, str]]]:
    """(pid, argv, environment) of every process of this user whose argv holds all of
    `words` (doctor looks for `mp-engine mcp --http`); the environment is {} where it
    cannot be read."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline", "uids"]):
        try:
            argv = p.info["cmdline"] or []
            if p.info["uids"] is None or p.info["uids"].real != os.getuid() or p.pid == os.getpid():
                continue
            if all(any(w == a or a.startswith(w + "=") for a in argv) for w in words):
                try:
                    env = p.environ()
                except psutil.Error:
                    env = {}
                found.append((p.pid, list(argv), env))
        except psutil.Error:
            continue
    return found


def children(pid: int) -> list[int]:
    """The direct children of `pid`; [] when it does not exist. The daemon asks before every
    pass (`process.reap_orphans`), so on Linux they are read from the kernel's list of
    `pid`'s children, which costs one file per thread; psutil finds them by reading every
    process of the host (bench figure 1: +2 ms from a drop to RUNNING), so it only answers
    where that list does not exist (macOS, the BSDs, a kernel without CONFIG_PROC_CHILDREN)."""
    if LINUX and (found := _proc_children(pid)) is not None:
        return found
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.Error:
        return []


def _proc_children(pid: int) -> list[int] | None:
    """`/proc/<pid>/task/<tid>/children` of every thread; None when the kernel has no such file."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []  # no such process
    except OSError:
        return None
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                found += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None  # no CONFIG_PROC_CHILDREN: psutil answers
        except (OSError, ValueError):
            continue
    return found


PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37


def _prctl(option: int, arg: int = 0) -> int | None:
    """`prctl(option, arg)`, or None where there is none: Linux only. Elsewhere a step's
    escaped descendants go to init (not killed with the step) and another process of the
    same user can read the daemon's environment; `doctor` says so."""
    if not LINUX:
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        return None


_subreaper = False  # this process became one (only then can an escaped process be our child)


def become_subreaper() -> bool:
    """`prctl(PR_SET_CHILD_SUBREAPER)` (Linux): a step's descendants that leave its process
    group (`setsid`, a double fork, a daemon) are re-parented to this process instead of
    init, so `process.kill_escaped` finds and kills them when the step ends. True when
    it took effect."""
    global _subreaper
    if _prctl(PR_SET_CHILD_SUBREAPER, 1) is None:
        return False
    import ctypes

    flag = ctypes.c_int(0)
    try:
        ctypes.CDLL(None).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    except (OSError, AttributeError):
        return False
    _subreaper = flag.value == 1
    return _subreaper


def is_subreaper() -> bool:
    """Whether `become_subreaper` took effect in this process."""
    return _subreaper


def make_undumpable() -> bool:
    """`prctl(PR_SET_DUMPABLE, 0)` (Linux): the daemon's `/proc/<pid>/environ` and `mem`
    become unreadable by other processes of the same user, so a step cannot read the
    daemon's secrets there (issue #20; root still can). True when it took effect."""
    return _prctl(PR_SET_DUMPABLE, 0) is not None and _prctl(PR_GET_DUMPABLE) == 0
