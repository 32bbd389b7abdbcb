"""`mp-engine run`: the daemon in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

from pathlib import Path

from mp_engine.commands import load
from mp_engine.daemon.loop import Daemon
from mp_engine.daemon.signals import join
from mp_engine.daemon.supervisor import Supervisor
from mp_engine.engine import Engine
from mp_engine.exitcodes import ExitCode


def run(root: Path) -> ExitCode:
    ws, config = load(root)
    engine = Engine.build(ws, config)
    # systemd notify + watchdog, the stall limit, log rotation and metrics (supervisor.py)
    supervisor = Supervisor(engine, config).install()
    daemon = Daemon(engine, supervisor)
    emitters = daemon.install_signal_handlers()
    try:
        supervisor.start_metrics()
        daemon.run()
    finally:
        supervisor.uninstall()
        join(emitters)
    return ExitCode.OK
