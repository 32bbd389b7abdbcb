"""Serving the dashboard: in a thread of the daemon (`[dashboard] listen`, commands/run.py)
or in the foreground (`mp-engine dashboard`). The socket is bound here, before uvicorn
starts, so a port in use is an error at once and port 0's choice is known."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.config.section import is_loopback
from mp_engine.core import secretenv
from mp_engine.core.errors import ConfigError
from mp_engine.core.exitcodes import ExitCode

if TYPE_CHECKING:
    from mp_engine.config.load import Config
    from mp_engine.core.workspace import Workspace


ANY = ("0.0.0.0", "::")  # listen on every address


def token_for(config: Config, given: str | None = None, token_file: Path | None = None) -> str | None:
    """The token: from `--token-file` (mode 0600), given on the command line, else from
    `[dashboard] token_env`."""
    if token_file is not None:
        try:
            text = token_file.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise ConfigError(f"cannot read --token-file {token_file}: {e.strerror}") from e
        if token_file.stat().st_mode & 0o077:
            raise ConfigError(f"{token_file} is readable by others; `chmod 600 {token_file}` first")
        return text or None
    return given or secretenv.environ().get(config.dashboard.token_env) or None


def check_address(host: str, token: str | None, token_env: str) -> None:
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"the dashboard would listen on {host}, which is not loopback, without a token: it shows MPs, outputs "
            f"and results to whoever connects. Set ${token_env} (a long random value), or listen on 127.0.0.1 "
            "and reach it through an SSH tunnel"
        )


def url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    shown = "127.0.0.1" if host in ANY else shown
    return f"http://{shown}:{port}/"


def opening(served: Served, token_env: str) -> str:
    """How to open it: the URL, and where the token comes from (never the token: logs keep it)."""
    if served.dashboard.token:
        return f"{served.url}?token=... (the value of ${token_env}; it is then kept in a cookie)"
    return served.url


def quiet_server() -> type:
    import uvicorn

    class Quiet(uvicorn.Server):
        """uvicorn wakes ten times a second to look for a shutdown and refresh its Date
        header; once a second does both (the daemon's idle CPU, bench figure 19)."""

        async def main_loop(self) -> None:
            counter = 0
            should_exit = await self.on_tick(counter)
            while not should_exit:
                counter = (counter + 10) % 864000  # on_tick counts tenths of a second
                await asyncio.sleep(1.0)
                should_exit = await self.on_tick(counter)

    return Quiet


class Served:
    """A dashboard served by uvicorn in a thread; `close()` stops it (its event streams end)."""

    def __init__(
        self,
        ws: Workspace,
        config: Config,
        host: str,
        port: int,
        token: str | None,
        on_refused: Callable[..., None] | None = None,
    ):
        from mp_engine.web import require

        require()
        import uvicorn

        from mp_engine.sync.redact import Redactor
        from mp_engine.web.app import Dashboard
        from mp_engine.web.documents import Documents

        check_address(host, token, config.dashboard.token_env)
        self.stop = threading.Event()
        docs = Documents(ws, config.model_dump(mode="json"), Redactor.from_config(config))
        # On every address any name reaches it (the token guards it); on one, its own name.
        hosts = ("*",) if host in ANY else () if is_loopback(host) else (host,)
        streams = (config.dashboard.max_streams_per_client, config.dashboard.max_streams)
        self.dashboard = Dashboard(
            docs, token=token, hosts=hosts, stop=self.stop, on_refused=on_refused, streams=streams
        )
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError as e:
            self.sock.close()
            raise ConfigError(
                f"the dashboard cannot listen on {host}:{port} ({e.strerror or e}): pick a free port "
                "([dashboard] listen, or --listen), or another engine on this host already uses it"
            ) from e
        self.sock.listen(64)
        self.host, self.port = host, self.sock.getsockname()[1]
        self.url = url(host, self.port)
        cfg = uvicorn.Config(
            self.dashboard.app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
        )
        self.server = quiet_server()(cfg)
        self.thread: threading.Thread | None = None

    def start(self) -> Served:
        self.thread = threading.Thread(target=self.run, name="mp-engine-dashboard", daemon=True)
        self.thread.start()
        return self

    def run(self) -> None:
        self.server.run(sockets=[self.sock])

    def close(self) -> None:
        self.stop.set()
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=5)
        self.sock.close()


def dashboard(
    root: Path, listen: str | None, token: str | None, echo: Callable[[str], Any], token_file: Path | None = None
) -> ExitCode:
    """`mp-engine dashboard`: serve the workspace's dashboard in the foreground until ^C.
    Read-only: it runs beside a daemon, or with none (then it shows the archive)."""
    from mp_engine.config.cache import load_for_reading
    from mp_engine.config.dashboard import DEFAULT_LISTEN, DashboardConfig

    ws, config, warning = load_for_reading(root)
    if warning:
        echo(f"warning: {warning}")
    where = DashboardConfig(listen=listen or config.dashboard.listen or DEFAULT_LISTEN).address
    served = Served(ws, config, *where, token_for(config, token, token_file))
    echo(f"mp-engine dashboard: {opening(served, config.dashboard.token_env)}  (read-only; ^C stops it)")
    served.run()
    served.sock.close()
    return ExitCode.OK
