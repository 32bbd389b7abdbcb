"""`mp-engine run`: the daemon in the foreground until SIGTERM/SIGINT."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.config.load import load_workspace
from mp_engine.core import secretenv
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.lock import DaemonLock
from mp_engine.core.pids import become_subreaper, make_undumpable
from mp_engine.daemon.loop import Daemon
from mp_engine.daemon.signals import join
from mp_engine.daemon.supervisor import Supervisor
from mp_engine.pipeline.engine import Engine

if TYPE_CHECKING:
    from mp_engine.config.load import Config


def serve_dashboard(engine: Engine, config: Config) -> Any:
    """`[dashboard] listen`: the dashboard in a thread of the daemon; its URL is printed
    (where its token comes from, never the token) and recorded as the event `dashboard_listening`."""
    if not config.dashboard.listen:
        return None
    from mp_engine.web.server import Served, opening, token_for

    def refused(**what: Any) -> None:
        engine.events.emit("dashboard_refused", **what)

    token = token_for(config)
    served = Served(engine.ws, config, *config.dashboard.address, token, on_refused=refused).start()
    engine.events.emit("dashboard_listening", address=f"{served.host}:{served.port}", token=bool(token))
    print(f"mp-engine: dashboard at {opening(served, config.dashboard.token_env)}", file=sys.stderr, flush=True)
    return served


def run(root: Path) -> ExitCode:
    ws, config = load_workspace(root)
    daemon_lock = DaemonLock(ws.daemon_lock_file)
    daemon_lock.acquire(ws.config_file)  # a second `run` on this workspace stops here (exit 4), naming the first
    undumpable = make_undumpable()  # before any secret is read into the engine
    # Secrets leave os.environ: git, ssh and helpers started while a step runs are readable by it.
    held = secretenv.hold(config.secret_names, config.secrets.env_patterns)
    subreaper = become_subreaper()  # a step's escaped descendants come back to us (process.kill_escaped)
    engine = Engine.build(ws, config)
    engine.events.emit("process_hardened", undumpable=undumpable, subreaper=subreaper, secrets_held=held)
    # systemd notify + watchdog, the stall limit, log rotation and metrics (supervisor.py)
    supervisor = Supervisor(engine, config).install()
    daemon = Daemon(engine, supervisor)
    emitters = daemon.install_signal_handlers()
    served = None
    try:
        supervisor.start_metrics()
        served = serve_dashboard(engine, config)
        daemon.run()
    finally:
        if served is not None:
            served.close()
        supervisor.uninstall()
        join(emitters)
        daemon_lock.release()
        secretenv.release()
    return ExitCode.OK
