"""A cap on a request's body, applied before anything parses it: a Content-Length above
the cap is refused at once, and a body without one (chunked) is read only up to the cap
(issue #46: /api/v1 read a 50 MB body in full before refusing it).

The MCP SDK has the same guard (`RequestBodyLimitMiddleware`, 4 MiB on /mcp and its OAuth
routes) but answers in plain text; here the answer says the limit and what to do, as JSON
for the API (a GPT Action's model reads it) or as a page for the consent form.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyCap:
    """ASGI middleware: `answer(limit)` for a body over `limit` bytes; otherwise the app
    gets the body as it came (buffered, at most `limit` bytes)."""

    def __init__(self, app: ASGIApp, limit: int, answer: Callable[[int], Response]):
        self.app, self.limit, self.answer = app, limit, answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.strip().isdigit() and int(declared) > self.limit:
            await self.answer(self.limit)(scope, receive, send)
            return
        held: deque[Message] = deque()
        size = 0
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.limit:
                await self.answer(self.limit)(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return held.popleft() if held else await receive()

        await self.app(scope, replay, send)


def megabytes(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"
