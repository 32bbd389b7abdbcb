"""The relay's two halves without a sandbox: the outside half joins a unix socket to the
allowed host; the inside half listens where the name maps and runs the command."""

from __future__ import annotations

import socket

from mp_engine.execute.relay import Relay, _address
from mp_engine.execute.relay_inside import MAP_FILE
from tests.netutil import TcpServer


def shout(conn: socket.socket) -> None:
    conn.sendall(conn.recv(100).upper())
    conn.close()


def test_the_outside_half_joins_each_socket_to_its_host_and_maps_names_to_loopback():
    server = TcpServer(shout)
    port = server.port
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
