"""The daemon: `run()` repeats `Engine.tick()` until a stop, waking on a watcher event, a
timer, or a signal. One pass is the engine's; everything around it is here (huey's
consumer: `loop()` is one pass, `run()` only repeats it)."""

from __future__ import annotations

import ctypes
import threading
import time

import structlog

from mp_engine.core.errors import MpEngineError
from mp_engine.daemon.signals import install_signal_handlers
from mp_engine.daemon.supervisor import Supervisor
from mp_engine.execute.process import reap_orphans
from mp_engine.inbox.watchers.auto import make_watcher
from mp_engine.inbox.watchers.base import ObserverWatcher
from mp_engine.inbox.watchers.events import WatchTarget
from mp_engine.pipeline.context import Action, TickResult
from mp_engine.pipeline.engine import Engine

log = structlog.get_logger("mp_engine.daemon")


class Daemon:
    def __init__(self, engine: Engine, supervisor: Supervisor | None = None):
        self.engine = engine
        self.supervisor = supervisor
        self.wake = threading.Event()
        self._last_trim = 0.0
        self._last_failure: tuple[str, float] | None = None

    def watch_target(self) -> WatchTarget:
        e = self.engine
        return WatchTarget(
            inbox_dir=e.ws.inbox_dir,
            inbox_file=e.ws.inbox_file,
            wake=self.wake.set,
            note_complete=e.inbox.note_complete,
            emit=e.events.emit,
            polling_interval=e.config.watch.polling_interval,
        )

    def run(self, watcher: ObserverWatcher | None = None) -> None:
        """Run until the engine's `stop` is set: tick, then sleep until an event, a timer
        or a stop. Always ends with the engine's shutdown (OFFLINE)."""
        engine, sup, cfg = self.engine, self.supervisor, self.engine.config
        engine.start(daemon=True)
        watcher = watcher or make_watcher(cfg.watch.mode, self.watch_target())
        watcher.start()
        if sup is not None:
            sup.loop_started(watcher)
        next_health = time.monotonic() + cfg.watch.health_interval
        try:
            while not engine.stop.is_set():
                self.wake.clear()
                reap_orphans()  # between passes no child of ours is running: see its docstring
                result = self.safe_tick()
                if sup is not None:  # READY, STATUS, WATCHDOG: only a pass that ended proves liveness
                    sup.after_tick(result)
                if engine.stop.is_set():
                    break
                now = time.monotonic()
                if now >= next_health:
                    watcher.ensure_healthy()
                    next_health = now + cfg.watch.health_interval
                self.wake.wait(self.sleep_for(result, now, next_health))
        finally:
            if sup is not None:
                sup.stopping()
            watcher.stop()
            engine.shutdown()

    def sleep_for(self, result: TickResult, now: float, next_health: float) -> float:
        """How long the loop may sleep after a pass: until the next timer of any kind."""
        cfg = self.engine.config
        timeout = min(cfg.engine.poll_interval, max(0.0, next_health - now))
        if result.wait_until is not None:
            timeout = min(timeout, max(0.0, result.wait_until - now))
        timeout = min(timeout, max(0.0, self.engine.sync.next_poll_at() - now))  # [git] poll_interval
        if result.action == Action.BUSY:
            timeout = max(timeout, 0.5)
        if self.supervisor is not None:  # wake in time for the next watchdog ping
            timeout = min(timeout, self.supervisor.max_wait())
        return timeout

    def safe_tick(self) -> TickResult:
        """`tick()`, but an unexpected failure is logged and the daemon lives on."""
        engine = self.engine
        retry_at = time.monotonic() + engine.config.engine.poll_interval
        try:
            result = engine.tick()
        except MpEngineError as e:
            self._failed(str(e))
            return TickResult(Action.FAILED, detail=str(e), wait_until=retry_at)
        except Exception as e:
            log.exception("tick crashed")
            self._failed(f"{type(e).__name__}: {e}")
            return TickResult(Action.FAILED, detail=str(e), wait_until=retry_at)
        if result.action in (Action.COMPLETED, Action.ERROR):
            self.trim_heap()
        return result

    def _failed(self, error: str, every: float = 60.0) -> None:
        """`tick_failed`, once per `every` seconds for the same error: a condition that lasts
        (a full disk, a state file someone broke) is one line a minute, not one per pass."""
        now = time.monotonic()
        if self._last_failure and self._last_failure[0] == error and now - self._last_failure[1] < every:
            return
        self._last_failure = (error, now)
        self.engine.events.emit("tick_failed", error=error)

    def trim_heap(self, min_interval: float = 5.0) -> None:
        """Give freed heap memory back to the OS (glibc `malloc_trim`), at most every
        `min_interval` seconds: glibc otherwise keeps freed memory mapped, and a daemon that
        runs for weeks keeps its high-water mark (bench/RESULTS.md, figure 5)."""
        now = time.monotonic()
        if now - self._last_trim < min_interval:
            return
        self._last_trim = now
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to do
            pass

    def install_signal_handlers(self) -> list[threading.Thread]:
        """First SIGTERM/SIGINT: finish the current step and stop. Second: stop now."""
        return install_signal_handlers(self.engine, self.wake)
