"""Watching all the time: the state file at every change (inotify on the workspace root:
each version renamed into place is read and must parse with MP-1.3's fields, and it must
never be deleted or written in place), and the daemon's RSS, open files and CPU once a
second, with the number of results at that moment.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import IN_CLOSE_WRITE, IN_CREATE, IN_DELETE, IN_MOVED_TO, Inotify

IN_MOVED_FROM = 0x00000040
FIELDS = ("status", "current", "last_completed", "engine_version", "last_updated")
STATE = "SESSION_STATE.json"


class StateWatch(threading.Thread):
    """Every version of SESSION_STATE.json, read as it lands; `problems` lists each read
    that was missing, torn or without a field, and each delete or in-place write."""

    def __init__(self, root: Path):
        super().__init__(daemon=True, name="soak-state")
        self.path = root / STATE
        self.reads = 0
        self.problems: list[str] = []
        self.halts: list[dict[str, Any]] = []  # each distinct halt seen
        self.stopping = threading.Event()
        mask = IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_CREATE
        self._ino = Inotify(root, mask)

    def run(self) -> None:
        self.check()
        for mask, name in self._ino.events():
            if self.stopping.is_set():
                return
            if name != STATE:
                continue
            if mask & (IN_DELETE | IN_MOVED_FROM):
                self.problems.append(f"{time.strftime('%H:%M:%S')} {STATE} was removed (a reader finds it missing)")
            elif mask & (IN_CREATE | IN_CLOSE_WRITE) and not mask & IN_MOVED_TO:
                self.problems.append(
                    f"{time.strftime('%H:%M:%S')} {STATE} was written in place (a reader may see it torn)"
                )
            self.check()

    def check(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            self.problems.append(f"{time.strftime('%H:%M:%S')} {STATE} missing")
            return
        except ValueError as e:
            self.problems.append(f"{time.strftime('%H:%M:%S')} {STATE} torn: {e}")
            return
        self.reads += 1
        missing = [f for f in FIELDS if f not in data]
        if missing:
            self.problems.append(f"{STATE} without {', '.join(missing)}")
        halt = data.get("halt")
        if halt and (not self.halts or self.halts[-1].get("run_id") != halt.get("run_id")):
            self.halts.append(halt)

    def close(self) -> None:
        self.stopping.set()
        self._ino.close()


@dataclass(frozen=True)
class Sample:
    t: float
    life: int  # which start of the daemon
    rss_mb: float
    fds: int
    cpu: float  # seconds, self + reaped children
    results: int


def proc_sample(pid: int) -> tuple[float, int, float] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rss = next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmRSS:")), None)
    if rss is None:  # a zombie (killed, not reaped yet) has no memory to report
        return None
    cpu = sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")
    return rss, fds, cpu


class Sampler(threading.Thread):
    """The daemon's RSS, fds and CPU every `interval` s, whichever life of it runs."""

    def __init__(self, engine: Any, results: Any, interval: float = 1.0):
        super().__init__(daemon=True, name="soak-sampler")
        self.engine, self.results, self.interval = engine, results, interval
        self.samples: list[Sample] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            self.take()

    def take(self) -> Sample | None:
        pid, life = self.engine.pid, self.engine.lives
        got = proc_sample(pid) if pid else None
        if got is None:
            return None
        s = Sample(time.monotonic(), life, got[0], got[1], got[2], self.results())
        self.samples.append(s)
        return s

    def close(self) -> None:
        self.stopping.set()


def cpu_share(pid: int, seconds: float) -> float | None:
    """The process's CPU over `seconds` (self and reaped children), in % of one core."""
    first = proc_sample(pid)
    t0 = time.monotonic()
    time.sleep(seconds)  # the measurement window itself
    last = proc_sample(pid)
    if first is None or last is None:
        return None
    return 100.0 * (last[2] - first[2]) / (time.monotonic() - t0)
