"""`mp-engine run`: the daemon in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

from pathlib import Path

from mp_engine import secretenv
from mp_engine.commands import load
from mp_engine.daemon.loop import Daemon
from mp_engine.daemon.signals import join
from mp_engine.daemon.supervisor import Supervisor
from mp_engine.engine import Engine
from mp_engine.exitcodes import ExitCode
from mp_engine.lock import DaemonLock
from mp_engine.pids import become_subreaper, make_undumpable


def run(root: Path) -> ExitCode:
    ws, config = load(root)
    daemon_lock = DaemonLock(ws.daemon_lock_file)
    daemon_lock.acquire(ws.config_file)  # a second `run` on this workspace stops here (exit 4), naming the first
    undumpable = make_undumpable()  # before any secret is read into the engine
    # Secrets leave os.environ: git, ssh and helpers started while a step runs are readable by it.
    held = secretenv.hold(config.secrets.env, config.secrets.env_patterns)
    subreaper = become_subreaper()  # a step's escaped descendants come back to us (process.kill_escaped)
    engine = Engine.build(ws, config)
    engine.events.emit("process_hardened", undumpable=undumpable, subreaper=subreaper, secrets_held=held)
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
        daemon_lock.release()
        secretenv.release()
    return ExitCode.OK
