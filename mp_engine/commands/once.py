"""`mp-engine once`: exactly one pass; the exit code says what it did."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from mp_engine.config.load import Config, load_workspace
from mp_engine.core import secretenv
from mp_engine.core.errors import DaemonRunning
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.lock import DaemonLock
from mp_engine.core.pids import become_subreaper
from mp_engine.core.workspace import Workspace
from mp_engine.daemon.signals import install_signal_handlers, join
from mp_engine.pipeline.context import Action
from mp_engine.pipeline.engine import Engine

ONCE_EXIT: dict[Action, ExitCode] = {
    Action.COMPLETED: ExitCode.OK,
    Action.SUPERSEDED: ExitCode.OK,
    Action.CANCELLED: ExitCode.OK,
    Action.IDLE: ExitCode.OK,
    Action.WAITING: ExitCode.OK,
    Action.ERROR: ExitCode.MP_ERROR,
    Action.HALTED: ExitCode.HALTED,
    Action.BUSY: ExitCode.BUSY,
    Action.INTERRUPTED: ExitCode.INTERRUPTED,
    Action.FAILED: ExitCode.MP_ERROR,
}


def once(root: Path, echo: Callable[[str], None]) -> ExitCode:
    ws, config = load_workspace(root)
    with alone(ws, "once"):
        return one_pass(ws, config, echo)


@contextlib.contextmanager
def alone(ws: Workspace, command: str) -> Iterator[None]:
    """Hold the daemon lock for one pass: never beside a daemon (exit 4, nothing written),
    which takes the MP itself; a pass of its own would record the engine as stopped."""
    lock = DaemonLock(ws.daemon_lock_file)
    try:
        lock.acquire(ws.config_file, mode="once")
    except DaemonRunning as e:
        raise DaemonRunning(f"{e} `{command}` is for a workspace no daemon serves; the daemon runs the MP.") from None
    try:
        yield
    finally:
        lock.release()


def one_pass(
    ws: Workspace, config: Config, echo: Callable[[str], None], listeners: Sequence[Callable[..., None]] = ()
) -> ExitCode:
    """One pass of the engine (the lock held); `listeners` see every event it records."""
    become_subreaper()  # a step's escaped descendants come back to us (process.kill_escaped)
    secretenv.hold(config.secret_names, config.secrets.env_patterns)  # as `run` does
    engine = Engine.build(ws, config)
    engine.events.listeners.extend(listeners)
    emitters = install_signal_handlers(engine, threading.Event())
    engine.start(daemon=False)
    try:
        result = engine.tick()
        # A file dropped just now is not "complete" until it settles; one pass waits for
        # that window rather than reporting nothing to do. An agent run waiting out a rate
        # or usage limit (run_id set) may wait for hours: report it instead.
        # A SUPERSEDED result (an MP replaced before it ran) is bookkeeping: the pass goes
        # on to the MP that replaced it.
        while not engine.stop.is_set() and (
            result.action == Action.SUPERSEDED
            or (result.action == Action.WAITING and result.wait_until is not None and result.run_id is None)
        ):
            if result.action == Action.WAITING and result.wait_until is not None:
                engine.stop.wait(max(0.0, result.wait_until - time.monotonic()))
            result = engine.tick()
    finally:
        engine.shutdown()
        join(emitters)
        secretenv.release()
    echo(result.action + (f" {result.mp_id}" if result.mp_id else "") + (f": {result.detail}" if result.detail else ""))
    return ONCE_EXIT.get(result.action, ExitCode.MP_ERROR)
