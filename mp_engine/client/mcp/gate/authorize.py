"""/authorize answers a page, not a redirect, until the client and its redirect URI are
known good (issue #46). The MCP SDK's handler, on an error before it has validated them (a
bad PKCE parameter, say), looks the client up anyway and redirects to its redirect URI: with
a client anyone may register, that made the server a redirector to anywhere. In front of
it, this checks the request, the client, the redirect URI (registered, and of a kind
registration.py accepts) and the scope, for a client the owner has never allowed (one the
owner allowed, or added by hand, keeps its URIs); any problem is a page for the person at
the browser. What is
left for the SDK redirects only to a client's own, validated URI (RFC 6749 §4.1.2.1), and
for a scope error only when the owner has allowed that client before (RFC 9700 §4.11.2: an
open redirector otherwise)."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from mcp.server.auth.errors import stringify_pydantic_error
from mcp.server.auth.handlers.authorize import AuthorizationRequest
from mcp.shared.auth import InvalidRedirectUriError, InvalidScopeError, OAuthClientInformationFull
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mp_engine.client.mcp.gate.registration import redirect_uri_problem
from mp_engine.client.mcp.guard import PAGE_HEADERS, refuse_because

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mp-engine: this sign-in cannot go on</title>
<style>body{{font:16px system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em}}</style>
</head><body><h1>This sign-in cannot go on</h1><p>{why}</p>
<p>Nothing was granted. Start again from the client (in ChatGPT or Claude: connect the app again).</p>
</body></html>
"""

GetClient = Callable[[str], Awaitable[OAuthClientInformationFull | None]]


class AuthorizeFront:
    """ASGI wrapper of the SDK's /authorize (a GET, or a POST whose body a BodyCap bounds)."""

    def __init__(self, app: ASGIApp, get_client: GetClient, consented: Callable[[str], bool]):
        self.app, self.get_client, self.consented = app, get_client, consented

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        params: Any = request.query_params
        replay = receive
        if request.method == "POST":
            body = await request.body()
            params = dict(parse_qsl(body.decode("latin-1")))
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if sent:
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

        why = await self.problem(params)
        if why is None:
            await self.app(scope, replay, send)
            return
        refuse_because(request, f"authorization request refused: {why}")
        page = HTMLResponse(PAGE.format(why=html.escape(why)), 400, headers=PAGE_HEADERS)
        await page(scope, receive, send)

    async def problem(self, params: Any) -> str | None:
        """Why the request cannot go on before the client's redirect URI is trusted, or None."""
        try:
            asked = AuthorizationRequest.model_validate(params)
        except ValidationError as e:
            return f"The authorization request is malformed: {stringify_pydantic_error(e)}."
        client = await self.get_client(asked.client_id)
        if client is None:
            return (
                f"No client {asked.client_id!r} is registered here (a client no one allowed is forgotten after "
                "an hour, and `mp-engine mcp revoke` removes one)."
            )
        try:
            uri = client.validate_redirect_uri(asked.redirect_uri)
        except InvalidRedirectUriError as e:
            return f"{e.message}."
        if self.consented(asked.client_id):  # the owner allowed this client and its URIs
            return None
        wrong = redirect_uri_problem(str(uri))
        if wrong is not None:
            return f"The client's redirect URI is refused: {wrong}."
        try:
            client.validate_scope(asked.scope)
        except InvalidScopeError as e:
            return f"{e.message}."
        return None
