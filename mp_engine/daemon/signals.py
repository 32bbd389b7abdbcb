"""SIGTERM and SIGINT: the first finishes the current step and stops, the second stops now.

Handlers only count and hand over to a thread (see `install_signal_handlers`); the loop
and the running step read the engine's `stop` and `stop_now` events."""

from __future__ import annotations

import signal
import threading

from mp_engine.pipeline.engine import Engine


def install_signal_handlers(engine: Engine, wake: threading.Event) -> list[threading.Thread]:
    """First SIGTERM/SIGINT: finish the current step and stop. Second: stop now.

    The handler touches no lock: it counts the signal and hands the rest to a short-lived
    thread, which sets the engine's events and writes the event. A handler runs in the main
    thread between two bytecodes, possibly inside `Event.wait()` while that holds the
    event's internal lock (after `with self._cond:`, before the wait releases it); calling
    `Event.set()` there deadlocks the main thread on a lock it holds itself. The same goes
    for the event log's lock. The caller joins the returned threads before exiting, so no
    log line is cut off at exit.
    """
    emitters: list[threading.Thread] = []
    received = [0]

    def relay(name: str, urgent: bool) -> None:
        if urgent:
            engine.stop_now.set()
        engine.stop.set()
        wake.set()
        engine.events.emit("stop_requested", signal=name, mode="now" if urgent else "after current step")

    def handler(signum: int, _frame: object) -> None:
        received[0] += 1
        emitter = threading.Thread(
            target=relay, args=(signal.Signals(signum).name, received[0] > 1), name="mp-engine-signal", daemon=True
        )
        emitters.append(emitter)
        emitter.start()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return emitters


def join(emitters: list[threading.Thread]) -> None:
    for emitter in list(emitters):
        emitter.join(timeout=2.0)
