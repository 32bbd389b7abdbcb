"""The soak's figures (issue #45): MPs and tasks done, faults by kind with their recovery
times, result latency per kind of MP, the daemon's RSS growth per 1,000 MPs after warm-up
(its longest life), its open files, its idle CPU between bursts, disk per 1,000 MPs."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from bench.common import Stat

WARM_UP = 100  # MPs a daemon life serves before its RSS counts
RSS_GROWTH_MAX = 2.0  # MB per 1,000 MPs after warm-up (bench figure 5's bound)
FDS_GROWTH_MAX = 2
IDLE_SLACK = 0.5  # % of a core above the fresh engine's idle CPU (or 1.5x it, whichever is more)


def stat(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    s = Stat.of(values)
    return {"median": s.median, "p95": s.p95, "max": max(values), "n": len(values)}


def longest_life(samples: list[Any]) -> list[Any]:
    """The samples of the daemon life that served the most MPs."""
    lives: dict[int, list[Any]] = {}
    for s in samples:
        lives.setdefault(s.life, []).append(s)
    if not lives:
        return []
    return max(lives.values(), key=lambda ss: ss[-1].results - ss[0].results)


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return None if den == 0 else sum((x - mx) * (y - my) for x, y in points) / den


def memory(samples: list[Any]) -> dict[str, Any]:
    life = longest_life(samples)
    if not life:
        return {}
    first = life[0].results
    warm = [s for s in life if s.results >= first + WARM_UP]
    growth = slope([(s.results, s.rss_mb) for s in warm])
    return {
        "life": life[0].life,
        "mps_in_life": life[-1].results - first,
        "mps_after_warm_up": (warm[-1].results - warm[0].results) if warm else 0,
        "rss_start_mb": life[0].rss_mb,
        "rss_warm_mb": warm[0].rss_mb if warm else None,
        "rss_end_mb": life[-1].rss_mb,
        "rss_growth_mb_per_1000": None if growth is None else growth * 1000,
        "fds_warm": warm[0].fds if warm else None,
        "fds_max": max(s.fds for s in (warm or life)),
        "fds_end": life[-1].fds,
        "rss_max_all_mb": max(s.rss_mb for s in samples),
    }


def resource_violations(driver: Any) -> list[str]:
    out = []
    mem = memory(driver.sampler.samples)
    if mem.get("mps_after_warm_up", 0) >= 300 and (mem.get("rss_growth_mb_per_1000") or 0) > RSS_GROWTH_MAX:
        out.append(
            f"RSS grew {mem['rss_growth_mb_per_1000']:.2f} MB per 1,000 MPs after warm-up (at most {RSS_GROWTH_MAX})"
        )
    if mem.get("fds_warm") is not None and mem["fds_end"] > mem["fds_warm"] + FDS_GROWTH_MAX:
        out.append(f"open files grew from {mem['fds_warm']} to {mem['fds_end']} in one daemon life")
    base = driver.idle_baseline
    if base is not None:
        bound = max(1.5 * base, base + IDLE_SLACK)
        for n, cp in enumerate(driver.checkpoints[1:], 1):
            if cp.idle_cpu is not None and cp.idle_cpu > bound:
                out.append(
                    f"idle CPU {cp.idle_cpu:.2f} % at checkpoint {n} (after {cp.at} results), bound {bound:.2f} %"
                )
    return out


def per_1000(points: list[tuple[int, int]]) -> float | None:
    """Bytes per 1,000 MPs between the first and the last checkpoint."""
    if len(points) < 2 or points[-1][0] == points[0][0]:
        return None
    return (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0]) * 1000


def compute(driver: Any, site: Any, sched: Any, elapsed: float) -> dict[str, Any]:
    sent = driver.sent.values()
    by_kind: dict[str, list[float]] = {}
    for s in sent:
        if s.latency is not None:
            by_kind.setdefault(str(s.kind), []).append(s.latency)
    struck = [f for f in driver.faults.done if f.applied]
    recovery: dict[str, list[float]] = {}
    for f in struck:
        if f.recovered is not None:
            recovery.setdefault(f.kind, []).append(f.recovered)
    cps = driver.checkpoints
    return {
        "elapsed_s": elapsed,
        "load": os.getloadavg(),
        "mps_sent": Counter(str(s.kind) for s in sent),
        "duplicates": sum(1 for j in sched.jobs if j.kind == "duplicate"),
        "results": len(site.remote.results),
        "tasks_done": tasks_done(driver, site),
        "faults_scheduled": Counter(f.kind for f in sched.faults),
        "faults_struck": Counter(f.kind for f in struck),
        "faults_missed": Counter(f.kind for f in driver.faults.done if not f.applied),
        "recovery": {k: stat(v) for k, v in recovery.items()},
        "latency": {k: stat(v) for k, v in by_kind.items()},
        "memory": memory(driver.sampler.samples),
        "idle_baseline": driver.idle_baseline,
        "idle": [cp.idle_cpu for cp in cps[1:]],
        "disk_per_1000": per_1000([(cp.at, cp.disk) for cp in cps]),
        "remote_per_1000": per_1000([(cp.at, cp.remote) for cp in cps]),
        "disk_end": cps[-1].disk if cps else None,
        "daemon_lives": site.engine.lives,
        "events": dict(site.host.events.counts),
        "alerts_received": len(site.receiver.got),
    }


def tasks_done(driver: Any, site: Any) -> int:
    """Micro-task commits the remote's branches reach (each counted once)."""
    out = site.remote.git("log", "--format=%s", "--branches") or ""
    return len(
        {
            line.split(":", 1)[0]
            for line in out.splitlines()
            if line.startswith("MP-") and " MT-" in line.split(":", 1)[0]
        }
    )
