"""The sandbox's only way out: a TCP relay to the hosts `sandbox_allow_hosts` lists.

The sandboxed process has a network namespace of its own (nothing but its loopback). For
each allowed `host:port` the engine listens on a unix socket in a private directory
(`Relay`, outside) and connects it to the real host; inside, `python -m
mp_engine.execute.relay inside DIR -- ARGV` listens on the host's address on the sandbox's
loopback (a name gets its own 127.0.0.x through the `hosts` file bound over /etc/hosts),
joins each connection to its socket, and runs ARGV. TLS goes through untouched (the relay
moves bytes), so certificates are checked end to end; every other host and port is
unreachable. Standard library only: the inside half starts on every sandboxed call.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MAP = "map.json"


def _pipe(a: socket.socket, b: socket.socket) -> None:
    def one_way(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=one_way, args=(b, a), daemon=True)
    t.start()
    one_way(a, b)
    t.join()
    a.close()
    b.close()


def _serve(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept until the listener closes; join each connection to a fresh `connect()`."""

    def handle(conn: socket.socket) -> None:
        try:
            other = connect()
        except OSError:
            conn.close()
            return
        _pipe(conn, other)

    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


class Relay:
    """The outside half: a private directory with one unix socket per allowed host, the
    sandbox's hosts file and the map the inside half reads. A context manager."""

    def __init__(self, hosts: Sequence[str]):
        self.hosts = list(hosts)
        self.dir = Path()
        self._listeners: list[socket.socket] = []

    def __enter__(self) -> Relay:
        self.dir = Path(tempfile.mkdtemp(prefix="mp-engine-relay-"))
        entries, names = [], ["127.0.0.1 localhost", "::1 localhost ip6-localhost"]
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
            target = (host, int(port))
            threading.Thread(
                target=_serve, args=(listener, lambda t=target: socket.create_connection(t, timeout=30)), daemon=True
            ).start()
            entries.append({"listen": listen, "port": int(port), "socket": str(path), "host": spec})
        (self.dir / "hosts").write_text("\n".join(names) + "\n")
        # No DNS inside: a name the hosts file lacks fails at once (the sandbox's own loopback
        # refuses port 53) instead of waiting on a nameserver it cannot reach.
        (self.dir / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        (self.dir / MAP).write_text(json.dumps(entries))
        return self

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


def inside(relay_dir: Path, argv: Sequence[str]) -> int:
    """The inside half: listen for each allowed host, run `argv`, return its exit code."""
    for entry in json.loads((relay_dir / MAP).read_text()):
        family = socket.AF_INET6 if ":" in entry["listen"] else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((entry["listen"], entry["port"]))
        listener.listen(64)

        def connect(path: str = entry["socket"]) -> socket.socket:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            return s

        threading.Thread(target=_serve, args=(listener, connect), daemon=True).start()
    try:
        proc = subprocess.Popen(list(argv))
    except OSError as e:
        print(f"mp-engine sandbox: cannot run {argv[0]}: {e}", file=sys.stderr)
        return 127
    code = proc.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":  # pragma: no cover - run inside the sandbox; tested through it
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "inside" or args[2] != "--":
        print("usage: python -m mp_engine.execute.relay inside DIR -- ARGV...", file=sys.stderr)
        sys.exit(2)
    sys.stdout.flush()
    os._exit(inside(Path(args[1]), args[3:]))
