"""What `mp-engine mcp --http` lets in: the public URL clients see (`--public-url`, behind a
tunnel such as cloudflared, ngrok or Tailscale Funnel), the Host values it answers to, and
an event for every refused request.

- Every URL the server hands out (OAuth metadata, the 401's `WWW-Authenticate`, the consent
  page, /openapi.json) derives from the public URL; without one it is the bound address.
- A request whose Host is not the public URL's host, a loopback name of the bound port, or an
  `--allowed-host` gets 421 on every path (DNS rebinding), before any route runs.
- Every 401, 403, 421 and 429, and any answer a route gave a reason for
  (`refuse_because`), is logged (`mcp_refused`) with the status, the path, the client's
  address (gate/peer.py: from X-Forwarded-For only through a `--trusted-proxy`) and the
  reason: the one the route gave, else the one the response gives.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import structlog
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mp_engine.config.section import is_loopback

PUBLIC_URL_ENV = "MP_ENGINE_MCP_PUBLIC_URL"
REFUSED = (401, 403, 421, 429)
# Every page for a person (the consent form, a lockout, an authorization that cannot go
# on): never cached, never framed, nothing loaded, a form only to itself.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}
log = structlog.get_logger("mp_engine.mcp")


def refuse_because(request: Request, reason: str) -> None:
    """The reason `Guard` logs for this request's refusal, for a route whose answer is a page
    for a person (the consent form again, after a wrong passphrase), not a reason. It rides
    in the request's state (the ASGI scope's `state`, which Guard holds too), never in the
    response."""
    request.state.refused_because = reason


@dataclass(frozen=True)
class Public:
    url: str  # scheme://host[:port], no trailing slash
    hosts: list[str]  # Host header values answered ("name:*" allows any port)
    origins: list[str] = field(default_factory=list)  # Origin values /mcp accepts from browsers


def resolve(public_url: str | None, bind: str, port: int, extra_hosts: tuple[str, ...] = ()) -> Public:
    """The public side of a server bound to `bind:port`; ValueError says what is wrong."""
    local = ["127.0.0.1", "localhost", "[::1]"] if is_loopback(bind) or bind in ("0.0.0.0", "::") else []
    hosts = [f"{name}:{port}" for name in local]
    origins = [f"http://{h}" for h in hosts]
    if public_url:
        parts = urlsplit(public_url.strip())
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError(f"--public-url {public_url!r} is not an http(s) URL like https://mp.example.org")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(
                f"--public-url {public_url!r} has a path, query or fragment: give the origin only "
                "(https://mp.example.org); the tunnel must forward its root to this server"
            )
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise ValueError(
                f"--public-url {public_url!r} is plain http: OAuth clients refuse an http issuer other than "
                "localhost. Use the tunnel's https URL."
            )
        url = f"{parts.scheme}://{parts.netloc}"
        default = {"https": 443, "http": 80}[parts.scheme]
        name = parts.netloc.rsplit(":", 1)[0] if parts.port else parts.netloc
        hosts += [parts.netloc] if parts.port not in (None, default) else [name, f"{name}:{default}"]
        origins.append(url)
    else:
        shown = bind if is_loopback(bind) else "127.0.0.1"
        url = f"http://{shown if ':' not in shown else f'[{shown}]'}:{port}"
        if not local:
            hosts.append(f"{bind}:{port}")
    for extra in extra_hosts:  # "name" answers on any port, "name:port" on that one
        hosts += [extra] if re.search(r":(\d+|\*)$", extra) else [extra, f"{extra}:*"]
    return Public(url, list(dict.fromkeys(hosts)), list(dict.fromkeys(origins)))


def host_allowed(host: str | None, allowed: list[str]) -> bool:
    if not host:
        return False
    return host in allowed or any(a.endswith(":*") and host.startswith(a[:-1]) for a in allowed)


class Guard:
    """ASGI middleware: 421 for a Host not allowed; an event for every refused request."""

    def __init__(self, app: ASGIApp, public: Public):
        self.app = app
        self.public = public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host")
        if not host_allowed(host, self.public.hosts):
            response = PlainTextResponse(
                f"Invalid Host header: {host!r} is not {self.public.url} (add it with --allowed-host)", 421
            )
            await response(scope, receive, self._watching(scope, send))
            return
        await self.app(scope, receive, self._watching(scope, send))

    def _watching(self, scope: Scope, send: Send) -> Send:
        seen: dict = {"status": 0, "body": b"", "auth": ""}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                seen["auth"] = Headers(raw=message.get("headers", [])).get("www-authenticate", "")
            elif message["type"] == "http.response.body" and (
                seen["status"] in REFUSED or (scope.get("state") or {}).get("refused_because")
            ):
                seen["body"] = (seen["body"] + message.get("body", b""))[:2048]
                if not message.get("more_body"):
                    client = scope.get("client")
                    because = (scope.get("state") or {}).get("refused_because")  # refuse_because()
                    log.warning(
                        "mcp_refused",
                        status=seen["status"],
                        method=scope.get("method"),
                        path=scope.get("path"),
                        client=client[0] if client else None,
                        host=Headers(scope=scope).get("host"),
                        reason=because or _reason(seen["auth"], seen["body"]),
                    )
            await send(message)

        return watch


def _reason(www_authenticate: str, body: bytes) -> str:
    described = re.search(r'error_description="([^"]*)"', www_authenticate)
    if described:
        return described.group(1)
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return str(data.get("error_description") or data.get("error") or data)[:300]
    return re.sub(r"<[^>]+>", "", text)[:300] or "no reason given"
