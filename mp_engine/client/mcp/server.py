"""`mp-engine mcp --repo URL`: the orchestrator's side of the channel as an MCP server
(docs/ORCHESTRATORS.md), on the official MCP Python SDK (imported only by this package).

The tools are tools.py's operations (commands/orchestrate.py does the work, with the same
code as `mp-engine send`); a failure comes back with MCP's `isError: true` and the same
structured content. Transports: stdio (Claude Desktop, Claude Code, the Agents SDK), or
streamable HTTP (`--http HOST:PORT`; ChatGPT's developer mode, Claude.ai's connectors)
served by uvicorn with:

- the public URL and Host checks of guard.py, and an event for every refused request;
- gate/: the client's address only from a `--trusted-proxy`, bounded registration and
  redirect URIs, /authorize's early errors as pages, capped request bodies, the
  passphrase lockout (issue #46);
- a static bearer token (`--token`), and with an owner passphrase OAuth 2.1 on the SDK's
  auth (provider.py, consent.py, store.py): dynamic registration, PKCE, refresh rotation,
  revocation, scopes `mp:read` and `mp:write`;
- the GPT Action path: /openapi.json and /api/v1 (openapi.py).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import ProviderTokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from mp_engine import __version__
from mp_engine.client.mcp.consent import Consent
from mp_engine.client.mcp.gate.authorize import AuthorizeFront
from mp_engine.client.mcp.gate.body import BodyCap, megabytes
from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.client.mcp.gate.peer import Peers, TrustedProxies
from mp_engine.client.mcp.gate.registration import RegistrationGate
from mp_engine.client.mcp.guard import PAGE_HEADERS, Guard, Public
from mp_engine.client.mcp.openapi import routes as api_routes
from mp_engine.client.mcp.provider import SCOPES, Provider
from mp_engine.client.mcp.store import Store
from mp_engine.client.mcp.tools import Operation, call, failed, operations
from mp_engine.client.orchestrate import Orchestrator

INSTRUCTIONS = """\
You drive mp-engine, a daemon that runs micro-projects (MPs) on a remote host and reports
through a git repository. An MP is Markdown: the first line `# MP-<major>.<minor> Title`,
optional header lines directly under it (`Timeout: 600`, `Approves: MP-1.3`,
`Executor: agent`), then fenced ```bash blocks run in order (```file <path> writes a
file), and an optional `## Validate` section whose ```bash blocks are checks. An
`Executor: agent` MP is natural-language work for the engine's coding agents instead: a
numbered list of tasks (an item may say `(after MT-001)`), or, with the header `Plan: auto`,
a goal the engine's planner splits into tasks; its `## Validate` checks alone decide that
it is done, so give it checks. Use a new id for every MP. Send with send_mp, then call wait_result with the MP id until done is
true (each call waits at most 25 s). A failed MP halts the engine: read the result's
diagnosis and its one fix, then send the corrected MP with approve (it adds
`Approves: <failed id>`). An agent MP that ended asking a question (its diagnosis says
so) goes on when you answer it with answer. get_status tells whether the engine is up,
running or halted.
"""

KINDS = {
    "read": ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    "write": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    "danger": ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True),
}


@dataclass(frozen=True)
class HttpAuth:
    """How HTTP callers prove themselves: a static token, OAuth (with the consent
    passphrase), or both."""

    public: Public
    token: str | None
    passphrase: str | None
    store_path: Path
    access_ttl: int = 3600
    proxies: TrustedProxies = TrustedProxies()
    limits: Limits = Limits()


def _tool(name: str, op: Operation) -> Callable[..., CallToolResult]:
    @functools.wraps(op.fn)  # the SDK reads the tool's input schema from the signature
    def run(**kwargs: Any) -> CallToolResult:
        token = get_access_token()  # None over stdio: no auth, every scope
        out = call(name, op, kwargs, token.scopes if token is not None else None, "mcp")
        text = json.dumps(out, indent=2, default=str)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=out, is_error=failed(out)
        )

    run.__annotations__ = {**op.fn.__annotations__, "return": CallToolResult}
    return run


def build_server(orch: Orchestrator, auth: HttpAuth | None = None) -> tuple[MCPServer, Provider | None]:
    """The MCP server with the eight tools; with `auth`, its HTTP side needs a token."""
    settings: dict[str, Any] = {}
    provider = None
    if auth is not None:
        provider = Provider(Store(auth.store_path), auth.public.url, auth.token, auth.access_ttl, auth.limits)
        oauth = auth.passphrase is not None
        # Without a passphrase no one can consent: no OAuth endpoints, tokens only.
        settings = {
            **({"auth_server_provider": provider} if oauth else {"token_verifier": ProviderTokenVerifier(provider)}),
            "auth": AuthSettings(
                issuer_url=auth.public.url,
                resource_server_url=f"{auth.public.url}/mcp",
                validate_token_resource=False,  # tokens are this server's own; no other resource
                client_registration_options=ClientRegistrationOptions(
                    enabled=oauth, valid_scopes=SCOPES, default_scopes=SCOPES
                ),
                revocation_options=RevocationOptions(enabled=True),
            ),
        }
    server = MCPServer("mp-engine", instructions=INSTRUCTIONS, version=__version__, **settings)
    for name, op in operations(orch).items():
        server.add_tool(_tool(name, op), name=name, description=op.fn.__doc__, annotations=KINDS[op.kind])
    return server, provider


def http_app(orch: Orchestrator, auth: HttpAuth) -> Any:
    """The whole HTTP side: MCP at /mcp, OAuth and consent, the GPT Action, behind Guard,
    behind Peers (the client's address)."""
    server, provider = build_server(orch, auth)
    assert provider is not None
    security = TransportSecuritySettings(allowed_hosts=auth.public.hosts, allowed_origins=auth.public.origins)
    app = server.streamable_http_app(transport_security=security)
    oauth = auth.passphrase is not None
    limits = auth.limits
    if oauth:
        assert auth.passphrase is not None
        app.router.routes.extend(Consent(provider, auth.passphrase, limits).routes())
        for route in app.router.routes:
            if isinstance(route, Route) and route.path == "/register":
                gate = RegistrationGate(route.app, provider.store, limits, provider.clock)
                route.app = BodyCap(gate, limits.register_body_bytes, _json_too_big)
            elif isinstance(route, Route) and route.path == "/authorize":
                front = AuthorizeFront(route.app, provider.get_client, provider.store.consented)
                route.app = BodyCap(front, limits.consent_body_bytes, _page_too_big)
    metadata_url = build_resource_metadata_url(f"{auth.public.url}/mcp")  # type: ignore[arg-type]
    app.router.routes.append(_at_the_root(app.router.routes, str(metadata_url)))
    app.router.routes.extend(api_routes(operations(orch), auth.public.url, oauth, metadata_url, limits.api_body_bytes))
    return Peers(Guard(app, auth.public), auth.proxies)


def _json_too_big(limit: int) -> Response:
    why = f"the registration is larger than {megabytes(limit)}: send only the metadata a client needs"
    return JSONResponse({"error": "invalid_client_metadata", "error_description": why}, 413)


def _page_too_big(limit: int) -> Response:
    return HTMLResponse(f"<p>The request is larger than {megabytes(limit)}.</p>", 413, headers=PAGE_HEADERS)


def _at_the_root(routes: list[Any], metadata_url: str) -> Route:
    """The SDK serves the protected-resource metadata where RFC 9728 puts it for /mcp
    (`/.well-known/oauth-protected-resource/mcp`); clients probe the root too (issue #44),
    which then answers the same document, through the SDK's own handler."""
    suffixed = urlsplit(metadata_url).path
    sdk = next(r for r in routes if isinstance(r, Route) and r.path == suffixed)
    return Route("/.well-known/oauth-protected-resource", sdk.endpoint, methods=["GET", "OPTIONS"])


def serve_stdio(orch: Orchestrator) -> None:
    import anyio

    server, _ = build_server(orch)
    anyio.run(server.run_stdio_async)


def serve_http(orch: Orchestrator, auth: HttpAuth, host: str, port: int) -> None:
    import uvicorn

    sys.stderr.flush()
    # proxy_headers off: uvicorn would take the client's address from X-Forwarded-For on
    # every loopback connection, the tunnel's; gate/peer.py does it for --trusted-proxy only.
    config = uvicorn.Config(
        http_app(orch, auth), host=host, port=port, log_level="warning", lifespan="on", proxy_headers=False
    )
    uvicorn.Server(config).run()
