"""What every agent call of this engine cost, across MPs and fleet workers (issue #42): the
log the daily and monthly budgets (`[agent] daily_cost_usd`, `monthly_cost_usd`) are
held to, persisted so a restart keeps the spend.

`.mp-engine/agent_spend.log` is append-only JSON lines, one per call the engine charged
(`{"at", "usd", "key", "mp"}`) and one per alert it sent (`{"at", "alerted"}`), so an
alert goes out once per period. A charge is keyed (the call's run and ledger step): a
call charged again after a crash (its recorded outcome replayed, a fleet attempt
re-attached) is counted once. Every reader follows the file from where it stopped (one
`stat` per look), so the engine's runs and `status` see the same totals; the file is
rewritten with the current month's lines once older ones pile up.

Days and months are the calendar's in `[agent] budget_clock`: the host's zone (`local`),
`UTC`, or a named zone.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from mp_engine.core.atomic import append_durable, atomic_write

SPEND_FILE = "agent_spend.log"
PERIODS = ("day", "month")
COMPACT_AFTER = 2000  # lines before the current month's that make the file worth rewriting


def zone(clock: str) -> tzinfo | None:
    """The zone of `budget_clock`; None is the host's own (naive local time)."""
    if clock == "local":
        return None
    return UTC if clock == "UTC" else ZoneInfo(clock)


@dataclass(frozen=True)
class Period:
    """One calendar day or month: its key (`2026-04-05`, `2026-04`) and when it ends."""

    name: str  # "day" or "month"
    key: str
    starts: float  # epoch seconds
    ends: float

    @property
    def resets_at(self) -> str:
        return datetime.fromtimestamp(self.ends, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def periods(now: float, tz: tzinfo | None) -> tuple[Period, Period]:
    """The day and the month `now` falls in."""
    local = datetime.fromtimestamp(now, tz)
    day = datetime(local.year, local.month, local.day, tzinfo=tz)
    # Wall-clock arithmetic, then back to epoch seconds: a day of a DST change is 23 or 25 hours.
    next_day = datetime.combine(day.date() + timedelta(days=1), day.time(), tzinfo=tz)
    month = datetime(local.year, local.month, 1, tzinfo=tz)
    next_month = datetime(local.year + local.month // 12, local.month % 12 + 1, 1, tzinfo=tz)
    return (
        Period("day", f"{day:%Y-%m-%d}", day.timestamp(), next_day.timestamp()),
        Period("month", f"{month:%Y-%m}", month.timestamp(), next_month.timestamp()),
    )


class SpendLog:
    """The engine's spend, read and appended; safe to share between threads."""

    def __init__(self, path: Path, clock: str = "local"):
        self.path = Path(path)
        self.tz = zone(clock)
        self._lock = threading.Lock()
        self._offset = 0
        self._ino: int | None = None
        self._lines = 0
        self._keys: set[str] = set()
        self._alerted: set[str] = set()
        self._sums: dict[str, float] = {}  # period key -> dollars
        self._oldest = float("inf")

    # -- reading -----------------------------------------------------------------------

    def _follow(self) -> None:
        """Read what was appended since the last look (all of it when the file was replaced)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._ino is not None:
                self._reset()
            return
        if st.st_ino != self._ino or st.st_size < self._offset:
            self._reset()
            self._ino = st.st_ino
        if st.st_size == self._offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read(st.st_size - self._offset)
        end = data.rfind(b"\n") + 1  # a line torn by a crash mid-append waits for its end
        for line in data[:end].splitlines():
            self._take(line)
        self._offset += end

    def _reset(self) -> None:
        self._offset, self._ino, self._lines, self._oldest = 0, None, 0, float("inf")
        self._keys, self._alerted, self._sums = set(), set(), {}

    def _take(self, line: bytes) -> None:
        try:
            rec = json.loads(line)
            at = float(rec["at"])
        except (ValueError, KeyError, TypeError):
            return  # not a line this module wrote
        self._lines += 1
        self._oldest = min(self._oldest, at)
        if "alerted" in rec:
            self._alerted.add(str(rec["alerted"]))
            return
        key = str(rec.get("key") or "")
        if key and key in self._keys:
            return
        self._keys.add(key)
        for p in periods(at, self.tz):
            self._sums[p.key] = self._sums.get(p.key, 0.0) + float(rec.get("usd") or 0.0)

    def spent(self, now: float | None = None) -> dict[str, tuple[Period, float]]:
        """Dollars charged in the current day and month: {"day": (period, usd), "month": ...}."""
        now = time.time() if now is None else now
        with self._lock:
            self._follow()
            return {p.name: (p, round(self._sums.get(p.key, 0.0), 6)) for p in periods(now, self.tz)}

    def days(self, now: float | None = None) -> list[tuple[str, float]]:
        """Dollars charged per day of the current month, oldest first (days with a charge)."""
        now = time.time() if now is None else now
        with self._lock:
            self._follow()
            month = periods(now, self.tz)[1].key + "-"
            return sorted((k, round(v, 6)) for k, v in self._sums.items() if len(k) == 10 and k.startswith(month))

    def charged(self, key: str) -> bool:
        with self._lock:
            self._follow()
            return key in self._keys

    # -- writing -----------------------------------------------------------------------

    def charge(self, key: str, usd: float, *, mp: str, at: float | None = None) -> bool:
        """Count one call's dollars; False when `key` was counted already."""
        at = time.time() if at is None else at
        with self._lock:
            self._follow()
            if key in self._keys:
                return False
            self._compact(at)
            self._append({"at": round(at, 3), "usd": round(usd, 6), "key": key, "mp": mp})
            return True

    def alert_once(self, period: Period, at: float | None = None) -> bool:
        """True the first time a budget of `period` is found spent (then an alert goes out)."""
        mark = f"{period.name}:{period.key}"
        with self._lock:
            self._follow()
            if mark in self._alerted:
                return False
            self._append({"at": round(time.time() if at is None else at, 3), "alerted": mark})
            return True

    def _append(self, rec: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        append_durable(self.path, json.dumps(rec, sort_keys=True))  # money: fsynced
        self._follow()

    def _compact(self, now: float) -> None:
        """Keep the current month's lines only, once older ones pile up (the keys of older
        calls no longer matter: their periods are over)."""
        month = periods(now, self.tz)[1]
        if self._oldest >= month.starts or self._lines < COMPACT_AFTER:
            return
        kept = []
        for line in self.path.read_bytes().splitlines():
            try:
                if float(json.loads(line)["at"]) >= month.starts:
                    kept.append(line.decode("utf-8") + "\n")
            except (ValueError, KeyError, TypeError):
                continue
        atomic_write(self.path, "".join(kept))
        self._reset()
        self._follow()


def summary(log: SpendLog, limits: dict[str, float | None], now: float | None = None) -> dict[str, Any]:
    """What `status`, the dashboard and the metrics show: per period, spent, the limit, what
    is left and when it resets."""
    out: dict[str, Any] = {}
    for name, (period, usd) in log.spent(now).items():
        limit = limits.get(name)
        out[name] = {
            "key": period.key,
            "spent_usd": usd,
            "limit_usd": limit,
            "left_usd": None if limit is None else round(max(0.0, limit - usd), 6),
            "resets_at": period.resets_at,
        }
    return out


def report(local_dir: Path, agent: dict[str, Any]) -> dict[str, Any] | None:
    """The budgets as `status` and the dashboard show them, from `[agent]` as its JSON
    (config/cache.py), or None when neither budget is set."""
    limits = {"day": agent.get("daily_cost_usd"), "month": agent.get("monthly_cost_usd")}
    if all(v is None for v in limits.values()):
        return None
    log = SpendLog(local_dir / SPEND_FILE, agent.get("budget_clock") or "local")
    days = [{"day": day, "usd": usd} for day, usd in log.days()]  # the dashboard's plot
    return {**summary(log, limits), "on_budget": agent.get("on_budget", "wait"), "days": days}


def line(budget: dict[str, Any]) -> str:
    """`$1.2000 of $5 today, $3.0000 of $50 this month` (a period without a limit: its spend)."""
    parts = []
    for name, word in (("day", "today"), ("month", "this month")):
        p = budget.get(name) or {}
        limit = p.get("limit_usd")
        spent = f"${p.get('spent_usd', 0.0):.4f}"
        parts.append(f"{spent} of ${limit:g} {word}" if limit is not None else f"{spent} {word}")
    spent_out = [n for n in ("day", "month") if (budget.get(n) or {}).get("left_usd") == 0]
    if spent_out:
        p = budget[spent_out[-1]]
        parts.append(f"SPENT: agent calls wait until {p['resets_at']}")
    return ", ".join(parts)
