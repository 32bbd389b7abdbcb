"""The relay's two halves without a sandbox: the outside half joins a unix socket to the
allowed host; the inside half listens where the name maps and runs the command."""

from __future__ import annotations

import socket
import threading

from mp_engine.execute.relay import Relay, _address
from mp_engine.execute.relay_inside import MAP_FILE


def echo_server() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(conn.recv(100).upper())
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_the_outside_half_joins_each_socket_to_its_host_and_maps_names_to_loopback():
    server = echo_server()
    port = server.getsockname()[1]
    with Relay([f"127.0.0.1:{port}", "api.example.com:443"]) as relay:
        entries = [line.split(" ") for line in (relay.dir / MAP_FILE).read_text().splitlines()]
        assert [(listen, int(p)) for listen, p, _ in entries] == [("127.0.0.1", port), ("127.0.0.3", 443)]
        assert "127.0.0.3 api.example.com" in (relay.dir / "hosts").read_text()
        s = socket.socket(socket.AF_UNIX)
        s.connect(entries[0][2])
        s.sendall(b"hello")
        assert s.recv(100) == b"HELLO"
        s.close()
        d = relay.dir
    assert not d.exists()  # the directory and its sockets go with the call
    server.close()


def test_addresses_and_names():
    assert _address("localhost") == "127.0.0.1" and _address("::1") == "::1" and _address("[::1]") == "::1"
    assert _address("api.openai.com") is None
