"""`mp-engine worker`: serve a Temporal task queue with this host's agents (docs/FLEET.md).

The worker's directory (`--root`) holds its own mp-engine.toml (its `[agent]` levels,
whose credentials stay on this host, `[fleet]`, `[secrets]`) and its data in `worker/`
(a clone of the work repository, the attempts' worktrees). It is not a workspace: no
inbox, no state; the channel engine keeps those.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

from mp_engine.config.load import load_config
from mp_engine.core import secretenv
from mp_engine.core.errors import ConfigError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.pids import become_subreaper, make_undumpable
from mp_engine.execute.sandbox import require as require_sandbox


def work_remote(config_remote: str, fleet_remote: str, given: str | None) -> str | None:
    """The repository the worker clones: `--remote`, `[fleet] work_remote`, or `[git]
    remote` when it is a URL (a remote name means nothing on this host)."""
    if given or fleet_remote:
        return given or fleet_remote
    return config_remote if ("://" in config_remote or ":" in config_remote or "/" in config_remote) else None


def worker(
    root: Path,
    temporal: str | None,
    task_queue: str | None,
    max_parallel: int | None,
    remote: str | None,
    name: str | None,
    metrics: str,
    echo: Callable[[str], None],
) -> ExitCode:
    from mp_engine.fleet.host import WorkerHost
    from mp_engine.fleet.worker import serve

    root = Path(os.path.realpath(root.expanduser()))
    config = load_config(root)
    fleet = config.fleet.model_copy(update={"temporal": temporal} if temporal else {})
    if not fleet.temporal:
        raise ConfigError(
            "the worker needs Temporal's address. Fix: pass --temporal HOST:PORT or set [fleet] temporal in "
            f"{root / 'mp-engine.toml'}."
        )
    url = work_remote(config.git.remote, fleet.work_remote, remote)
    if not url:
        raise ConfigError(
            "the worker needs the work repository the engine pushes tasks to. Fix: pass --remote URL or set "
            f"[fleet] work_remote in {root / 'mp-engine.toml'}."
        )
    require_sandbox(config.agent)  # the worker's agents run in its sandbox, or not at all
    queue = task_queue or fleet.task_queue
    max_parallel = max_parallel or config.agent.max_parallel
    make_undumpable()  # before any secret is read
    secretenv.hold(config.secret_names, config.secrets.env_patterns)
    become_subreaper()
    identity = f"{name or os.getpid()}@{socket.gethostname()}"
    host = WorkerHost(root / "worker", config, url, identity)
    host.prepare()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        echo(f"worker {identity} serves queue {queue!r} on {fleet.temporal} ({max_parallel} at once); work in {url}")
        await serve(fleet, host, queue=queue, max_parallel=max_parallel, stop=stop, metrics=metrics)

    try:
        asyncio.run(main())
    finally:
        secretenv.release()
    return ExitCode.OK
