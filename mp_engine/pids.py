"""Questions about other processes on this host, answered from the kernel."""

from __future__ import annotations

import os
import socket
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


def gone_here(record: dict | None) -> bool:
    """True when `record` (`{pid, host}`: a daemon or a lock owner) names a process on this
    host that is no longer running; False for another host's, or no record."""
    return bool(record) and record.get("host") == socket.gethostname() and not pid_alive(record.get("pid"))


def proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time in clock ticks) of `pid` from /proc, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state); pgrp is field 5, starttime field 22.
    return int(fields[2]), int(fields[19])


PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


def make_undumpable() -> bool:
    """`prctl(PR_SET_DUMPABLE, 0)` (Linux): the daemon's `/proc/<pid>/environ` and `mem`
    become unreadable by other processes of the same user, so a step cannot read the
    daemon's secrets there (issue #20; root still can). True when it took effect."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux, or no prctl
        return False
