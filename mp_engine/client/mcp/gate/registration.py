"""Dynamic client registration (RFC 7591, served by the MCP SDK) within bounds (issue #46):

- A redirect URI is `https` with a host, or `http` on a loopback address (RFC 8252 §7.3,
  native clients such as Claude Code); no fragment, no user name or password. Anything
  else (`javascript:`, `data:`, `file:`, plain http to another host) would let
  `/authorize` send a browser anywhere.
- The metadata is bounded: the name's length, the number and length of redirect URIs, and
  the whole request's size (body.py, before it is parsed).
- Registration is rate-limited per hour, on the server and per address (an address that
  tells clients apart, peer.py); the store holds at most `max_clients`; a client that no
  one allowed on the consent page is forgotten after `unconsented_client_s`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.client.mcp.gate.peer import distinct
from mp_engine.client.mcp.guard import refuse_because
from mp_engine.client.mcp.store import Store

HOUR = 3600.0
# The address a registration comes from, for the provider to store with the client.
REGISTERING_FROM: ContextVar[str | None] = ContextVar("registering_from", default=None)


# Schemes a browser acts on itself: never a redirect URI, even for a client added by hand.
BROWSER_SCHEMES = {
    "javascript",
    "data",
    "file",
    "vbscript",
    "blob",
    "about",
    "filesystem",
    "view-source",
    "ftp",
    "ws",
    "wss",
}


def redirect_uri_problem(uri: str, *, private_use: bool = False) -> str | None:
    """Why `uri` may not be a redirect URI, or None when it may. `private_use`: a native
    app's own scheme (RFC 8252 §7.1, `cursor://...`) is accepted too, for a client the
    owner adds by hand (`mcp clients add`), never through dynamic registration."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        return f"{uri[:80]!r} is not a URL"
    if parts.fragment or "#" in uri:
        return f"{uri[:80]!r} has a fragment, which a redirect URI may not have (RFC 6749 §3.1.2)"
    if parts.username is not None or parts.password is not None:
        return f"{uri[:80]!r} carries a user name or password"
    if parts.scheme == "https" and host:
        return None
    if parts.scheme == "http" and host and _loopback(host):
        return None
    if private_use and parts.scheme not in BROWSER_SCHEMES | {"http", "https"} and parts.scheme:
        return None
    return (
        f"{uri[:80]!r} is not an https URL, nor http on a loopback address (127.0.0.1, [::1] or localhost, "
        "RFC 8252 §7.3): a redirect URI must be one of those"
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def metadata_problem(info: dict[str, Any], limits: Limits) -> tuple[str, str] | None:
    """(RFC 7591 error code, why) when the client's metadata is out of bounds, else None."""
    name = str(info.get("client_name") or "")
    if len(name) > limits.client_name_chars:
        return "invalid_client_metadata", f"client_name has {len(name)} characters; at most {limits.client_name_chars}"
    uris = [str(u) for u in info.get("redirect_uris") or []]
    if not uris or len(uris) > limits.redirect_uris:
        return "invalid_redirect_uri", f"give 1 to {limits.redirect_uris} redirect_uris, not {len(uris)}"
    for uri in uris:
        if len(uri) > limits.redirect_uri_chars:
            return (
                "invalid_redirect_uri",
                f"a redirect URI has {len(uri)} characters; at most {limits.redirect_uri_chars}",
            )
        problem = redirect_uri_problem(uri)
        if problem:
            return "invalid_redirect_uri", problem
    return None


def admission(
    recent: list[tuple[float, str | None]], clients: int, address: str | None, now: float, limits: Limits
) -> tuple[str, float | None] | None:
    """(why, seconds to wait or None) when a registration must wait or cannot happen, else
    None. `recent`: (when, address) of the registrations of the last hour; `clients`: how
    many the store holds."""
    if clients >= limits.max_clients:
        return (
            f"the server holds {clients} clients, its limit: remove unused ones with `mp-engine mcp revoke` "
            "on the host (`mp-engine mcp clients` lists them)",
            None,
        )
    mine = [when for when, where in recent if address is not None and where == address]
    for times, limit, whose in (
        (mine, limits.registrations_per_address_per_hour, "from this address"),
        ([when for when, _ in recent], limits.registrations_per_hour, "on this server"),
    ):
        if len(times) >= limit:
            wait = min(times) + HOUR - now
            return f"{len(times)} clients registered {whose} in the last hour, the limit", max(1.0, wait)
    return None


class RegistrationGate:
    """ASGI wrapper of the SDK's /register: the rate and the store's cap first (429), and
    the address the registration comes from for the provider."""

    def __init__(self, app: ASGIApp, store: Store, limits: Limits, clock: Callable[[], float]):
        self.app, self.store, self.limits, self.clock = app, store, limits, clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        now, address = self.clock(), distinct(request)
        self.store.forget_unconsented(now - self.limits.unconsented_client_s)
        refused = admission(self.store.registered(now - HOUR), self.store.count_clients(), address, now, self.limits)
        if refused is not None:
            why, wait = refused
            refuse_because(request, f"registration refused: {why}")
            fix = " Or add the client by hand on the host: `mp-engine mcp clients add`."
            body = {"error": "temporarily_unavailable", "error_description": why + "." + fix}
            headers = {"Retry-After": str(int(wait) + 1)} if wait else {}
            await JSONResponse(body, 429, headers=headers)(scope, receive, send)
            return
        token = REGISTERING_FROM.set(address)
        try:
            await self.app(scope, receive, send)
        finally:
            REGISTERING_FROM.reset(token)
