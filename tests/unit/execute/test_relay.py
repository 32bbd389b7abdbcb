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


def test_each_connection_is_reported_and_an_allowed_host_that_refuses_with_its_error():
    """The sandboxed client only sees its connection closed; the relay says which allowed host
    could not be reached and why (issue #44), so the call's diagnosis names it; and which it
    joined, so a failure after that is not the sandbox's."""
    server = TcpServer(shout)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # closed when the block ends: nothing listens there
    heard: list[tuple[str, OSError | None]] = []
    hosts = [f"127.0.0.1:{server.port}", f"127.0.0.1:{closed}"]
    with Relay(hosts, lambda host, e: heard.append((host, e))) as relay:
        paths = [line.split()[2] for line in (relay.dir / MAP_FILE).read_text().splitlines()]
        for path, say, reply in zip(paths, (b"hi", b""), (b"HI", b""), strict=True):
            c = socket.socket(socket.AF_UNIX)
            c.connect(path)
            if say:  # to nothing: the relay may have closed it already
                c.sendall(say)
            assert c.recv(100) == reply  # joined; joined to nothing: closed
            c.close()
    assert [(h, e) for h, e in heard[:1]] == [(hosts[0], None)]
    assert heard[1][0] == hosts[1] and isinstance(heard[1][1], ConnectionRefusedError), heard
    server.close()


def test_addresses_and_names():
    assert _address("localhost") == "127.0.0.1" and _address("::1") == "::1" and _address("[::1]") == "::1"
    assert _address("api.openai.com") is None
