"""Liveness for a supervised daemon: systemd's notify protocol and watchdog, launchd's stall limit.

`Daemon.run` (loop.py) calls three hooks: `loop_started` once the observer runs, `after_tick` after
every pass, and `stopping` on the way out. A running step calls `heartbeat` from its wait
loop (through `process.set_heartbeat`). Liveness is what those calls prove, nothing else:

- READY=1 goes out after the first pass (the first inbox rescan and, with [git] on, the
  first sync are done), or from the first step heartbeat when that pass runs an MP (the
  rescan has then found it): a long first MP must not make `systemctl start` time out.
- WATCHDOG=1 goes out only from those calls, and only while the observer thread is alive.
  A timer thread that pinged regardless would hide a dead engine; here a loop wedged
  anywhere else (a lock wait, a hung git command, a stuck filesystem) stops the pings and
  systemd kills and restarts the service (WatchdogSec=).
- `[watch] stall_limit` (launchd has no watchdog): a monitor thread ends the process with
  exit code 9 when no call came for that long, and launchd's KeepAlive restarts it.
- STATUS= lines say in words what the engine does; STOPPING=1 when it stops.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any

import structlog

import mp_engine.execute.process as process
from mp_engine.config.load import Config
from mp_engine.core.clock import iso_at
from mp_engine.core.errors import ConfigError, StateError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.daemon.health import SYNC_FAILURES, progress_of, read_last_sync_ok, record_sync_ok, status_line
from mp_engine.daemon.notify import Notifier, watchdog_interval
from mp_engine.pipeline.context import TickResult
from mp_engine.pipeline.engine import Engine

log = structlog.get_logger("mp_engine.daemon.supervisor")

STATUS_EVERY = 1.0  # seconds between STATUS refreshes from a step's heartbeat


class Supervisor:
    """Feeds the supervisor (systemd or launchd) with what the engine's loop proves."""

    def __init__(self, engine: Engine, config: Config, notifier: Notifier | None = None):
        self.engine = engine
        self.config = config
        self.notifier = notifier or Notifier.from_env()
        self.ping_every = watchdog_interval() if self.notifier.enabled else None
        self.stall_limit = config.watch.stall_limit
        floor = max(config.engine.poll_interval, config.watch.health_interval)
        if self.stall_limit and self.stall_limit <= floor:
            raise ConfigError(
                f"watch.stall_limit = {self.stall_limit:g} s is not above the loop's longest idle wait "
                f"({floor:g} s, from engine.poll_interval and watch.health_interval): the daemon would stop "
                "itself while idle. Raise it (it should also exceed engine.lock_timeout and git.timeout)."
            )
        self.last_progress = time.monotonic()
        self.ready = False
        self.metrics: Any = None
        self._watcher: Any = None
        self._main = threading.get_ident()
        self._next_ping = 0.0
        self._status: str | None = None
        self._status_at = 0.0
        self._stopping_sent = False
        self._polled_at: float | None = None
        self._sync_failed = False
        self._closed = threading.Event()
        self._monitor: threading.Thread | None = None

    # -- installation ----------------------------------------------------------------

    def install(self) -> Supervisor:
        """Hook into the engine, the event log and the step wait loop; start the monitor."""
        cfg, ws = self.config, self.engine.ws
        if cfg.engine.events_max_bytes:
            self.engine.events.rotate_at(cfg.engine.events_max_bytes, cfg.engine.events_keep, ws.local_dir)
        self.engine.events.listeners.append(self._on_event)
        if cfg.metrics.listen:
            # Lazy: prometheus_client is imported only when [metrics] listen is set.
            from mp_engine.daemon.metrics import Metrics

            self.metrics = Metrics(self.engine, cfg, last_sync_ok=self.last_sync_ok)
            self.engine.events.listeners.append(self.metrics.on_event)
        process.set_heartbeat(self.heartbeat)
        beat = getattr(self.engine.sync, "heartbeat", None)  # the git channel's
        if beat is not None:
            beat.progress = functools.partial(progress_of, ws)
        if self.stall_limit:
            self._monitor = threading.Thread(target=self._watch_stall, name="mp-engine-stall", daemon=True)
            self._monitor.start()
        return self

    def start_metrics(self) -> None:
        """Serve /metrics (after `install`, before the loop); logs and records the port."""
        if self.metrics is not None:
            try:
                host, port = self.metrics.serve()
            except OSError as e:
                raise ConfigError(
                    f"metrics.listen = {self.config.metrics.listen!r}: cannot listen there ({e.strerror or e}). "
                    "Pick a free port, or another engine on this host already uses it."
                ) from e
            self.engine.events.emit("metrics_listening", address=f"{host}:{port}")

    def uninstall(self) -> None:
        self._closed.set()
        process.set_heartbeat(None)
        if self.metrics is not None:
            self.metrics.close()
        self.notifier.close()

    # -- hooks called by Daemon.run and the step wait loop ---------------------------

    def loop_started(self, watcher: Any) -> None:
        self._watcher = watcher
        self.last_progress = time.monotonic()

    def after_tick(self, result: TickResult) -> None:
        """One pass of the main loop ended: that is progress."""
        self.last_progress = now = time.monotonic()
        self._note_sync(now)
        if not self.notifier.enabled:
            return
        self._announce(now, force_status=True)

    def heartbeat(self) -> None:
        """From a running step's wait loop (every 50 ms), on the loop's own thread only."""
        if threading.get_ident() != self._main:
            return
        self.last_progress = now = time.monotonic()
        if self.notifier.enabled:
            try:
                self._announce(now, force_status=now - self._status_at >= STATUS_EVERY)
            except Exception:  # the step must go on whatever the notifier does
                log.exception("supervisor heartbeat failed")

    def max_wait(self) -> float:
        """How long the loop may sleep before the next watchdog ping is due."""
        if self.ping_every is None:
            return float("inf")
        return max(0.0, self._next_ping - time.monotonic())

    def stopping(self) -> None:
        self._send_stopping()

    # -- notify ----------------------------------------------------------------------

    def _announce(self, now: float, *, force_status: bool) -> None:
        if self.engine.stop.is_set():
            self._send_stopping()
        fields: dict[str, str | int] = {}
        if force_status and not self._stopping_sent:
            line = self.status_line()
            self._status_at = now
            if line != self._status:
                self._status = fields["STATUS"] = line
        if not self.ready:
            self.ready = True
            fields["READY"] = 1
            fields.setdefault("STATUS", self._status or "ready")
        if self.ping_every is not None and now >= self._next_ping and self._observer_alive():
            fields["WATCHDOG"] = 1
            self._next_ping = now + self.ping_every
        if fields:
            self.notifier.send(**fields)

    def _send_stopping(self) -> None:
        if self._stopping_sent or not self.notifier.enabled:
            return
        self._stopping_sent = True
        self.notifier.send(STOPPING=1, STATUS=f"stopping ({self.status_line()})")

    def _observer_alive(self) -> bool:
        observer = getattr(self._watcher, "observer", None)
        return observer is not None and observer.is_alive()

    def status_line(self) -> str:
        try:
            return status_line(self.engine.ws, self.engine.state.read())
        except StateError as e:
            return f"state unreadable: {e}"[:200]

    # -- sync bookkeeping ------------------------------------------------------------

    def _on_event(self, record: dict[str, Any]) -> None:
        if record["event"] in SYNC_FAILURES:
            self._sync_failed = True
        elif record["event"] in ("sync_pushed", "sync_pulled"):
            self._sync_ok()

    def _note_sync(self, now: float) -> None:
        """A poll that neither failed nor found the remote unreachable is a successful sync."""
        sync = self.engine.sync
        if not sync.enabled:
            return
        polled = sync.next_poll_at()
        if polled != self._polled_at:
            self._polled_at = polled
            # sync_unreachable is emitted once per outage, so a poll during one is seen in
            # the sync's own unreachable mark.
            if not self._sync_failed and sync.unreachable is None:
                self._sync_ok()
            self._sync_failed = False

    def _sync_ok(self) -> None:
        record_sync_ok(self.engine.ws.local_dir)

    def last_sync_ok(self) -> str | None:
        return read_last_sync_ok(self.engine.ws.local_dir)

    # -- stall limit -----------------------------------------------------------------

    def _watch_stall(self) -> None:
        period = min(1.0, self.stall_limit / 4)
        while not self._closed.wait(period):
            idle = time.monotonic() - self.last_progress
            if idle > self.stall_limit:
                self._stalled(idle)

    def stall_fields(self, msg: str, idle: float, now: float) -> dict[str, Any]:
        """The `engine_stalled` event's fields: `detail`, and the spec's FR-EVT-WF-RECOVERY
        fields for a run that went from running to stalled (issue #44): `from_state`,
        `to_state`, `reason`, `last_heartbeat_ts` (the last proof of progress, RFC 3339),
        `threshold_secs` (`[watch] stall_limit`), `actor`."""
        return {
            "detail": msg,
            "from_state": "running",
            "to_state": "stalled",
            "reason": msg,
            "last_heartbeat_ts": iso_at(now - idle),
            "threshold_secs": self.stall_limit,
            "actor": "system",
        }

    def _stalled(self, idle: float) -> None:
        """Exit non-zero so launchd (KeepAlive SuccessfulExit=false) or systemd restarts us.

        `os._exit`, not `sys.exit`: the main thread is the one that is stuck, and atexit
        handlers or a lock it holds must not keep a wedged process alive. The event is
        written from a helper thread with a deadline, since the stuck thread may hold the
        event log's lock; the open run resumes on the next start (the ledger says where).
        """
        msg = (
            f"the main loop made no progress for {idle:.0f} s (watch.stall_limit = {self.stall_limit:g} s); "
            f"exiting with code {ExitCode.STALLED} so the service manager restarts the engine"
        )
        log.critical("main loop stalled", idle=round(idle, 1), stall_limit=self.stall_limit, exit_code=ExitCode.STALLED)
        writer = threading.Thread(
            target=self.engine.events.emit,
            args=("engine_stalled",),
            kwargs=self.stall_fields(msg, idle, time.time()),
            daemon=True,
        )
        writer.start()
        writer.join(timeout=2.0)
        if self.notifier.enabled:
            self.notifier.send(STATUS=f"stalled: {msg}")
        os._exit(ExitCode.STALLED)
