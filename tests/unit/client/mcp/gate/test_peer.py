"""The client's address: X-Forwarded-For only from a trusted proxy, only an entry that
parses as an address, the rightmost one the proxy wrote; and whether it tells clients apart."""

from __future__ import annotations

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mp_engine.client.mcp.gate.peer import Peers, TrustedProxies, distinct
from mp_engine.core.errors import ConfigError


def seen(proxies: tuple[str, ...], peer: str, forwarded: list[str]) -> dict:
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"host": request.client.host, "distinct": distinct(request)})

    app = Peers(Starlette(routes=[Route("/", echo)]), TrustedProxies(proxies))

    async def main() -> dict:
        transport = httpx2.ASGITransport(app=app, client=(peer, 5000))
        async with httpx2.AsyncClient(transport=transport, base_url="http://t") as c:
            return (await c.get("/", headers=[("X-Forwarded-For", f) for f in forwarded])).json()

    return anyio.run(main)


def test_without_a_trusted_proxy_the_header_is_words():
    assert seen((), "127.0.0.1", ["198.51.100.7"]) == {"host": "127.0.0.1", "distinct": None}  # shared
    assert seen((), "203.0.113.5", ["198.51.100.7"]) == {"host": "203.0.113.5", "distinct": "203.0.113.5"}


def test_a_trusted_proxy_names_the_address_it_saw_not_what_the_client_wrote():
    # the client wrote "1.2.3.4"; the tunnel appended the address it saw
    assert seen(("127.0.0.1",), "127.0.0.1", ["1.2.3.4, 198.51.100.7"])["host"] == "198.51.100.7"
    assert seen(("127.0.0.0/8",), "127.0.0.1", ["1.2.3.4", "198.51.100.7, 127.0.0.2"])["distinct"] == "198.51.100.7"
    # not an address: the header stops counting there, and no one is told apart by it
    assert seen(("127.0.0.1",), "127.0.0.1", ["1.2.3.4, evil"]) == {"host": "127.0.0.1", "distinct": None}
    assert seen(("127.0.0.1",), "127.0.0.1", []) == {"host": "127.0.0.1", "distinct": None}
    # an IPv6 client
    assert seen(("::1",), "::1", ["2001:db8::1"])["distinct"] == "2001:db8::1"


def test_a_trusted_proxy_must_be_an_address_or_a_network():
    with pytest.raises(ConfigError, match="is not an IP address or network"):
        TrustedProxies(("tunnel.local",))
    assert "10.1.2.3" in TrustedProxies(("10.0.0.0/8",)) and "nonsense" not in TrustedProxies(("10.0.0.0/8",))
