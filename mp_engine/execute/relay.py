"""The sandbox's only way out: a TCP relay to the hosts `sandbox_allow_hosts` lists.

The sandboxed process has a network namespace of its own (nothing but its loopback). For
each allowed `host:port` the engine listens on a unix socket in a private directory
(`Relay`, here) and connects it to the real host; inside, relay_inside.py listens on the
host's address on the sandbox's loopback (a name gets its own 127.0.0.x through the `hosts`
file bound over /etc/hosts), joins each connection to its socket, and runs the call. TLS
goes through untouched (the relay moves bytes), so certificates are checked end to end;
every other host and port is unreachable.

When an allowed host itself cannot be reached (it refuses, its name does not resolve), the
sandboxed client only sees its connection closed; `on_connect` hears each connection to an
allowed host, with the error when it could not be made, so the call's diagnosis can tell a
host that is down from one the sandbox refused, and name it (issue #44).
"""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict

from mp_engine.execute.relay_inside import MAP_FILE, serve

# (host:port, None) joined to an allowed host, or (host:port, why) it could not be reached
Heard = Callable[[str, OSError | None], None]


class _Entry(TypedDict):
    """One line of the map the inside half reads: the address it listens on, and our socket."""

    listen: str
    port: int
    socket: str


class Relay:
    """The outside half: a private directory with one unix socket per allowed host, the
    sandbox's hosts file and the map the inside half reads. A context manager."""

    def __init__(self, hosts: Sequence[str], on_connect: Heard | None = None):
        self.hosts = list(hosts)
        self.on_connect = on_connect
        self.dir = Path()
        self._listeners: list[socket.socket] = []

    def __enter__(self) -> Relay:
        self.dir = Path(tempfile.mkdtemp(prefix="mp-engine-relay-"))
        entries: list[_Entry] = []
        names = ["127.0.0.1 localhost", "::1 localhost ip6-localhost"]
        for i, spec in enumerate(self.hosts):
            host, _, port = spec.rpartition(":")
            listen = _address(host)
            if listen is None:  # a name: its own loopback address inside
                listen = f"127.0.0.{i + 2}"
                names.append(f"{listen} {host}")
            if any((e["listen"], e["port"]) == (listen, int(port)) for e in entries):
                continue  # localhost:P and 127.0.0.1:P are one address inside
            path = self.dir / f"{i}.sock"
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            listener.listen(64)
            self._listeners.append(listener)
            threading.Thread(target=serve, args=(listener, self._connector(spec)), daemon=True).start()
            entries.append({"listen": listen, "port": int(port), "socket": str(path)})
        (self.dir / "hosts").write_text("\n".join(names) + "\n")
        # No DNS inside: a name the hosts file lacks fails at once (the sandbox's own loopback
        # refuses port 53) instead of waiting on a nameserver it cannot reach.
        (self.dir / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        (self.dir / MAP_FILE).write_text("".join(f"{e['listen']} {e['port']} {e['socket']}\n" for e in entries))
        return self

    def _connector(self, spec: str) -> Callable[[], socket.socket]:
        host, _, port = spec.rpartition(":")
        target = (host.strip("[]"), int(port))

        def connect() -> socket.socket:
            try:
                conn = socket.create_connection(target, timeout=30)
            except OSError as e:
                if self.on_connect is not None:
                    self.on_connect(spec, e)
                raise
            if self.on_connect is not None:
                self.on_connect(spec, None)
            conn.settimeout(None)  # 30 s to connect, not to every read: a model may think longer
            return conn

        return connect

    def __exit__(self, *exc: Any) -> None:
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _address(host: str) -> str | None:
    """`host` as the address to listen on inside, when it is one (localhost included)."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None
