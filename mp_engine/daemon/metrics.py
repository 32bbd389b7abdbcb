"""Prometheus metrics for `[metrics] listen` (issue #5), fed by the event log.

The counters and histograms are updated by an event-log listener, so they count exactly
what the flight recorder records; the gauges read the workspace when scraped (the halted
flag from SESSION_STATE.json, which `mp-engine approve` in another process may change).
Imported only when metrics are on: `prometheus_client` stays out of the CLI's start-up.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from mp_engine.config.load import Config
from mp_engine.core.clock import parse_iso
from mp_engine.core.errors import StateError
from mp_engine.daemon.health import SYNC_FAILURES
from mp_engine.pipeline.engine import Engine
from mp_engine.record.spend import SPEND_FILE, SpendLog

# Steps run from milliseconds (file blocks) to the step timeout; MPs up to hours.
STEP_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600)
MP_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400)


class Metrics:
    def __init__(self, engine: Engine, config: Config, *, last_sync_ok: Callable[[], str | None]):
        self.engine = engine
        self.config = config
        self.registry = CollectorRegistry()
        self._server: Any = None
        self._claimed: dict[str, float] = {}
        r = self.registry
        self.mps = Counter("mp_engine_mps", "MPs finished, by result status", ["status"], registry=r)
        self.step_seconds = Histogram(
            "mp_engine_step_duration_seconds", "Duration of finished steps and checks", buckets=STEP_BUCKETS, registry=r
        )
        self.mp_seconds = Histogram(
            "mp_engine_mp_duration_seconds", "Duration of finished MPs", ["status"], buckets=MP_BUCKETS, registry=r
        )
        self.sync_failures = Counter(
            "mp_engine_sync_failures", "Failed git syncs, by kind of event", ["event"], registry=r
        )
        self.tokens = Counter(
            "mp_engine_agent_tokens",
            "Tokens of agent calls, as their CLIs reported them",
            ["level", "kind"],
            registry=r,
        )
        self.cost = Counter(
            "mp_engine_agent_cost_usd", "Dollars of agent calls, as their CLIs reported them", ["level"], registry=r
        )
        since = Gauge(
            "mp_engine_seconds_since_last_sync",
            "Seconds since the last successful git sync (NaN: none yet, or [git] off)",
            registry=r,
        )
        since.set_function(lambda: _seconds_since(last_sync_ok()))
        halted = Gauge("mp_engine_halted", "1 while the engine is halted on an ERROR awaiting approval", registry=r)
        halted.set_function(self._halted)
        self._budget_gauges()
        for status in ("COMPLETED", "ERROR"):  # export zeros, so rate() works from the first MP
            self.mps.labels(status)
        for event in SYNC_FAILURES:
            self.sync_failures.labels(event)

    def _budget_gauges(self) -> None:
        """`mp_engine_budget_remaining_usd{period}` (issue #42): dollars left of each budget
        set in `[agent]`, read from the spend log when scraped (every MP, every fleet worker)."""
        agent = self.config.agent
        limits = {"day": agent.daily_cost_usd, "month": agent.monthly_cost_usd}
        if all(v is None for v in limits.values()):
            return
        log = SpendLog(self.engine.ws.local_dir / SPEND_FILE, agent.budget_clock)
        left = Gauge(
            "mp_engine_budget_remaining_usd",
            "Dollars left of the engine's agent budget this day or month ([agent] daily_cost_usd, monthly_cost_usd)",
            ["period"],
            registry=self.registry,
        )

        def remaining(period: str, cap: float) -> Callable[[], float]:
            return lambda: max(0.0, cap - log.spent()[period][1])

        for period, limit in limits.items():
            if limit is not None:
                left.labels(period).set_function(remaining(period, limit))

    def _halted(self) -> float:
        try:
            return 1.0 if self.engine.state.read().halt is not None else 0.0
        except StateError:
            return math.nan

    def on_event(self, record: dict[str, Any]) -> None:
        """Event-log listener."""
        event = record["event"]
        if event == "mp_claimed" and record.get("run"):
            self._claimed[record["run"]] = time.monotonic()
        elif event == "step_finished" and record.get("duration") is not None:
            self.step_seconds.observe(float(record["duration"]))
        elif event == "mp_completed":
            self.mps.labels("COMPLETED").inc()
            self._claimed.pop(record.get("run") or "", None)
            if record.get("duration") is not None:
                self.mp_seconds.labels("COMPLETED").observe(float(record["duration"]))
        elif event == "mp_failed":
            self.mps.labels("ERROR").inc()
            duration = self._failed_duration(record.get("run"))
            if duration is not None:
                self.mp_seconds.labels("ERROR").observe(duration)
        elif event in SYNC_FAILURES:
            self.sync_failures.labels(event).inc()
        elif event == "micro_task_iteration_complete" and isinstance(record.get("usage"), dict):
            level, used = str(record.get("level_name")), record["usage"]
            for kind in ("input", "output", "cache_read", "cache_write"):
                if used.get(kind):
                    self.tokens.labels(level, kind).inc(int(used[kind]))
            if used.get("cost_usd"):
                self.cost.labels(level).inc(float(used["cost_usd"]))

    def _failed_duration(self, run_id: str | None) -> float | None:
        """mp_failed carries no duration: the run's result.json has it (written just before)."""
        if not run_id:
            return None
        started = self._claimed.pop(run_id, None)
        try:
            data = json.loads((self.engine.ws.runs_dir / run_id / "result.json").read_text(encoding="utf-8"))
            if data.get("duration") is not None:
                return float(data["duration"])
        except (OSError, ValueError):
            pass
        return None if started is None else time.monotonic() - started

    def serve(self) -> tuple[str, int]:
        """Start the HTTP server thread; return the address it listens on."""
        host, port = self.config.metrics.address
        self._server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return host, self._server.server_port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _seconds_since(iso: str | None) -> float:
    if not iso:
        return math.nan
    try:
        return max(0.0, time.time() - parse_iso(iso).timestamp())
    except ValueError:
        return math.nan
