"""The rolling-hour limit on agent calls (`[agent] calls_per_hour`), persisted so a restart
does not reset it."""

from __future__ import annotations

import threading
from pathlib import Path

from mp_engine.core.atomic import append_durable, atomic_write

WINDOW = 3600.0


class CallLimiter:
    """At most `per_hour` agent calls in any rolling hour, persisted (machine-local) so a
    restart does not reset it.

    The file is an append-only log, one epoch second per call: recording a call is one
    O_APPEND write (it survives `kill -9`; it is not fsynced). When the log holds many
    more lines than the window needs, it is rewritten with the calls still in the window.
    """

    def __init__(self, path: Path, per_hour: int):
        self.path = Path(path)
        self.per_hour = per_hour
        self._calls: list[float] | None = None
        self._lines = 0
        self._lock = threading.Lock()  # parallel tasks call at once (docs/AGENT.md)

    def _load(self) -> list[float]:
        if self._calls is None:
            calls = []
            try:
                for line in self.path.read_text(encoding="utf-8").splitlines():
                    try:
                        calls.append(float(line))
                    except ValueError:
                        continue  # a line torn by a crash mid-append
            except FileNotFoundError:
                pass
            self._calls, self._lines = sorted(calls), len(calls)
        return self._calls

    def _prune(self, now: float) -> list[float]:
        calls = [t for t in self._load() if t > now - WINDOW]
        self._calls = calls
        return calls

    def next_slot(self, now: float) -> float | None:
        """None if a call may start now, else the epoch second when one may."""
        with self._lock:
            return self._next_slot(now)

    def _next_slot(self, now: float) -> float | None:
        calls = self._prune(now)
        if len(calls) < self.per_hour:
            return None
        return calls[len(calls) - self.per_hour] + WINDOW

    def used(self, now: float) -> int:
        with self._lock:
            return len(self._prune(now))

    def record(self, now: float) -> None:
        with self._lock:
            self._record(now)

    def _record(self, now: float) -> None:
        calls = self._prune(now)
        calls.append(now)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._lines >= 2 * self.per_hour + 64:
            atomic_write(self.path, "".join(f"{t!r}\n" for t in calls), durable=False)
            self._lines = len(calls)
        else:
            append_durable(self.path, repr(now), durable=False)
            self._lines += 1
