"""A TCP server on loopback for the tests that need something listening: it accepts in a
thread and hands each connection to `handle` (default: keep it, in `accepted`)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class TcpServer:
    def __init__(self, handle: Callable[[socket.socket], None] | None = None):
        self.accepted: list[socket.socket] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self._handle = handle or self.accepted.append
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._handle(conn)

    def close(self) -> None:
        self.sock.close()
