"""The client's address behind a tunnel, and whether it tells clients apart.

uvicorn's own X-Forwarded-For handling is off (server.py): it trusted every connection from
127.0.0.1, the tunnel's own, took any string as an address and only the rightmost entry, so
anyone could pick the address the passphrase lockout counted (issue #46). Here the header
counts only on a connection from a `--trusted-proxy` (off by default), and only an entry
that parses as an IP address: the rightmost one not itself a trusted proxy, the address the
tunnel saw. Entries further left are the client's own words and are never read.

An address tells clients apart (`distinct`) when a trusted proxy vouched for it, or when
the client connected directly from another host. Otherwise (a loopback peer no trusted
proxy vouches for: a tunnel that sends no header, or one nobody configured) every client
shares it, and nothing may be locked out by it.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from mp_engine.core.errors import ConfigError

TRUSTED_PROXY_ENV = "MP_ENGINE_MCP_TRUSTED_PROXY"
VOUCHED = "address_vouched"  # in the scope's state: True, a trusted proxy named the address; False, it named none

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


class TrustedProxies:
    """The addresses (or networks) whose X-Forwarded-For counts: `--trusted-proxy`."""

    def __init__(self, specs: tuple[str, ...] = ()):
        self.networks: list[Network] = []
        for spec in specs:
            try:
                self.networks.append(ipaddress.ip_network(spec.strip(), strict=False))
            except ValueError:
                raise ConfigError(
                    f"--trusted-proxy {spec!r} is not an IP address or network: give the address the tunnel "
                    "connects from (cloudflared, ngrok or tailscale on this host: 127.0.0.1)"
                ) from None

    def __bool__(self) -> bool:
        return bool(self.networks)

    def __contains__(self, host: object) -> bool:
        ip = _ip(host) if isinstance(host, str) else None
        return ip is not None and any(ip in net for net in self.networks)

    def client_of(self, peer: str, forwarded: list[str]) -> str | None:
        """The address the trusted proxy `peer` names, or None (no usable entry)."""
        entries = [e.strip() for value in forwarded for e in value.split(",")]
        for entry in reversed(entries):
            ip = _ip(entry)
            if ip is None:
                return None  # a proxy would not write this: stop trusting the header here
            if str(ip) not in self:
                return str(ip)
        return None


class Peers:
    """ASGI middleware: the client's address in `scope["client"]`, from X-Forwarded-For
    only when the connection comes from a trusted proxy."""

    def __init__(self, app: ASGIApp, proxies: TrustedProxies):
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.get("client")
        if scope["type"] == "http" and peer and peer[0] in self.proxies:
            named = self.proxies.client_of(peer[0], Headers(scope=scope).getlist("x-forwarded-for"))
            if named is not None:
                scope["client"] = (named, 0)
            scope.setdefault("state", {})[VOUCHED] = named is not None
        await self.app(scope, receive, send)


def distinct(request: Request | Any) -> str | None:
    """The client's address when it tells clients apart (see the module's docstring), else None."""
    host = request.client.host if request.client else None
    if host is None:
        return None
    vouched = request.scope.get("state", {}).get(VOUCHED)
    if vouched is not None:  # through a trusted proxy: its word, or no one's
        return host if vouched else None
    ip = _ip(host)
    return host if ip is not None and not ip.is_loopback else None
