"""The inside half of the sandbox's relay (relay.py has the outside half): run by path as
`python -I -S relay_inside.py DIR -- ARGV` inside the sandbox, on every call that may reach
a host. It listens where DIR's map says (one line per allowed host: address, port, unix
socket), joins each connection to that socket, runs ARGV and exits with its status.

Startup is part of every sandboxed call's cost (bench figure 20): no site packages, and
only os, socket, sys and threading.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence

MAP_FILE = "map"


def pipe(a: socket.socket, b: socket.socket) -> None:
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


def serve(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept until the listener closes; join each connection to a fresh `connect()`."""

    def handle(conn: socket.socket) -> None:
        try:
            other = connect()
        except OSError:
            conn.close()
            return
        pipe(conn, other)

    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def inside(relay_dir: str, argv: Sequence[str]) -> int:
    """Listen for each allowed host, run `argv`, return its exit status."""
    with open(os.path.join(relay_dir, MAP_FILE)) as f:
        entries = [line.split(" ", 2) for line in f.read().splitlines() if line]
    for listen, port, path in entries:
        listener = socket.socket(socket.AF_INET6 if ":" in listen else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((listen, int(port)))
        listener.listen(64)

        def connect(path: str = path) -> socket.socket:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            return s

        threading.Thread(target=serve, args=(listener, connect), daemon=True).start()
    try:
        pid = os.posix_spawnp(argv[0], list(argv), os.environ)
    except OSError as e:
        print(f"mp-engine sandbox: cannot run {argv[0]}: {e}", file=sys.stderr)
        return 127
    _, status = os.waitpid(pid, 0)
    return (
        os.waitstatus_to_exitcode(status)
        if os.waitstatus_to_exitcode(status) >= 0
        else 128 - os.waitstatus_to_exitcode(status)
    )


if __name__ == "__main__":  # pragma: no cover - run inside the sandbox; tested through it
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        print("usage: relay_inside.py DIR -- ARGV...", file=sys.stderr)
        sys.exit(2)
    sys.stdout.flush()
    os._exit(inside(args[0], args[2:]))
