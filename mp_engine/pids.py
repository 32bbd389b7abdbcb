"""Questions about other processes on this host, answered from the kernel."""

from __future__ import annotations

import os
from pathlib import Path


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


def gone_here(record: dict | None) -> bool:
    """True when `record` (`{pid, host}`: a daemon or a lock owner) names a process on this
    host that is no longer running; False for another host's, or no record."""
    return bool(record) and record.get("host") == hostname() and not pid_alive(record.get("pid"))


def _stat_fields(pid: int) -> list[str] | None:
    """`/proc/<pid>/stat` from field 3 (state) on: the command name before it may hold
    blanks and parentheses, so the split starts after its last `)`."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time in clock ticks) of `pid` from /proc, or None."""
    fields = _stat_fields(pid)
    # fields[0] is field 3 (state); pgrp is field 5, starttime field 22.
    return (int(fields[2]), int(fields[19])) if fields else None


def is_zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] == "Z"


def environ_has(pid: int, entries: list[bytes]) -> bool:
    """True when `/proc/<pid>/environ` holds every `NAME=value` of `entries`."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = b"\0" + f.read() + b"\0"
    except OSError:
        return False
    return all(b"\0" + e + b"\0" in env for e in entries)


PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37


def _prctl(option: int, arg: int = 0) -> int | None:
    """`prctl(option, arg)` (Linux), or None where there is none."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        return None


def become_subreaper() -> bool:
    """`prctl(PR_SET_CHILD_SUBREAPER)` (Linux): a step's descendants that leave its process
    group (`setsid`, a double fork, a daemon) are re-parented to this process instead of
    init, so `process.kill_escaped` finds and kills them when the step ends. True when
    it took effect."""
    if _prctl(PR_SET_CHILD_SUBREAPER, 1) is None:
        return False
    import ctypes

    flag = ctypes.c_int(0)
    try:
        ctypes.CDLL(None).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return flag.value == 1


def children(pid: int) -> list[int]:
    """The direct children of `pid` (every thread's), from /proc; [] where unreadable."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            pass
    return found


def make_undumpable() -> bool:
    """`prctl(PR_SET_DUMPABLE, 0)` (Linux): the daemon's `/proc/<pid>/environ` and `mem`
    become unreadable by other processes of the same user, so a step cannot read the
    daemon's secrets there (issue #20; root still can). True when it took effect."""
    return _prctl(PR_SET_DUMPABLE, 0) is not None and _prctl(PR_GET_DUMPABLE) == 0
