"""One soak from its settings to its verdict: build the world, drive the schedule, stop the
daemon as a service manager does, check every invariant, compute the figures."""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.soak import check, figures, report
from bench.soak.driver import Driver, Stalled
from bench.soak.site import Site
from bench.soak.workload import FAULT_WEIGHTS, schedule


@dataclass(frozen=True)
class Settings:
    mps: int = 1500
    seed: int = 45
    faults: int | None = None  # default: one per ten MPs
    depth: int = 4  # MPs in flight (sent, no result yet)
    burst: int = 250  # MPs between idle checkpoints
    idle_window: float = 8.0
    disk_mb: int = 2048
    workdir: Path | None = None
    keep: bool = False
    fault_kinds: frozenset[str] | None = None

    @property
    def fault_count(self) -> int:
        return self.faults if self.faults is not None else max(1, self.mps // 10)


@dataclass
class Outcome:
    settings: Settings
    violations: dict[str, list[str]]
    figures: dict[str, Any]
    explained: list[str] = field(default_factory=list)
    workdir: Path | None = None

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


def soak(settings: Settings) -> Outcome:
    base = Path(tempfile.mkdtemp(prefix="mp-soak-", dir=settings.workdir))
    saved = dict(os.environ)
    site = Site(base, settings.disk_mb * 1024 * 1024)
    kinds = set(settings.fault_kinds or FAULT_WEIGHTS)
    if not site.disk.mounted:  # filling the real disk is no fault to inject
        kinds.discard("disk_full")
    sched = schedule(settings.seed, settings.mps, settings.fault_count, fault_kinds=kinds)
    os.environ.clear()  # the in-process route's git and clone: the soak's HOME and cache
    os.environ.update(site.route_env("orch"))
    driver = Driver(site, sched, depth=settings.depth, burst=settings.burst, idle_window=settings.idle_window)
    started = time.monotonic()
    outcome: Outcome | None = None
    try:
        try:
            driver.run()
        except Stalled as e:
            driver.problems.append(f"stalled: {e}")
        except Exception:  # noqa: BLE001 - the run ends; what it saw is still checked and reported
            driver.problems.append("the driver failed: " + traceback.format_exc(limit=8))
        code = driver.close()
        if code not in (0, None):
            driver.problems.append(f"the daemon's clean stop exited {code}")
        site.host.refresh()
        site.remote.refresh()
        violations, explained = evaluate(driver, site)
        figs = figures.compute(driver, site, sched, time.monotonic() - started)
        figs["disk_faults"] = (
            "" if site.disk.mounted else f"no disk faults: cannot mount a tmpfs here ({site.disk.reason})"
        )
        keep = settings.keep or any(violations.values())
        outcome = Outcome(settings, violations, figs, explained, base if keep else None)
        if keep:  # the verdict beside what it was drawn from, for the post-mortem
            (base / "report.md").write_text(report.markdown(outcome) + "\n")
        return outcome
    finally:
        os.environ.clear()
        os.environ.update(saved)
        site.close(keep=outcome is None or outcome.workdir is not None)


def evaluate(driver: Driver, site: Site) -> tuple[dict[str, list[str]], list[str]]:
    """Every invariant, by family; and the unexpected results a fault explains."""
    sent = driver.sent
    agent_ids = driver.agent_mp_ids()
    counted = check.results(sent, site.remote.results, site.host.results)
    ok, unexplained = check.explained(sent, site.host.runs, driver.faults.done)
    faults = driver.faults.done
    left = [f"checkpoint {n}: {item}" for n, cp in enumerate(driver.checkpoints) for item in cp.left]
    left += [f"after the stop: {item}" for item in check.leftovers(site, agent_ids)]
    return {
        "lost": counted["lost"],
        "double": counted["double"]
        + check.steps_twice(site.steps_log, site.host.runs)
        + check.iterations_twice(site.calls_log, site.host.runs, faults)
        + check.tasks_twice(site.remote),
        "torn": site.host.torn + site.remote.torn + check.missing_lines(site.host.runs, site.host.results),
        "state file": driver.watch.problems,
        "orphans": left,
        "unexpected results": unexplained + check.halts(site.host.events, sent),
        "bounds": check.bounds(site),
        "resources": figures.resource_violations(driver),
        "faults": driver.faults.problems,
        "driver": driver.problems,
    }, ok
