"""The delay proxy of figure 10 (bench/network.py): it delays, keeps order and counts turns."""

from __future__ import annotations

import socket
import socketserver
import threading
import time

from bench.network import DelayProxy


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data.upper())


def test_each_request_answer_costs_two_delays_and_one_turn():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy = DelayProxy(server.server_address[1], delay=0.05).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port)) as s:
            answers = []
            started = time.monotonic()
            for word in (b"one", b"two", b"three"):
                s.sendall(word)
                answers.append(s.recv(100))
            elapsed = time.monotonic() - started
        assert answers == [b"ONE", b"TWO", b"THREE"]
        assert elapsed >= 3 * 2 * 0.05  # every round trip pays the delay both ways
        # A turn is counted when the server's answer reaches the proxy, before the client
        # gets it 50 ms later: all three are counted once the client has its answers.
        assert proxy.reset() == (3, 1) and proxy.reset() == (0, 0)
    finally:
        proxy.stop()
        server.shutdown()
        server.server_close()
