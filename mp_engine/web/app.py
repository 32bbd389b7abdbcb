"""The dashboard's ASGI app (Starlette): the JSON API, the pages rendered from it, and a
server-sent event stream that pushes the pages' live parts when the workspace changes.

Read-only: no route changes anything; where an action is needed the page shows the
command. Every value that came from an MP or an agent is escaped by the templates
(Jinja2 with autoescape on), and every answer forbids what the pages never do (issue #46):
a Content-Security-Policy that allows only the dashboard's own script and style, no
framing (`frame-ancestors 'none'`), no referrer, no type sniffing. Requests must name a
loopback host or the configured one (no DNS rebinding), and, with a token, carry it
(`Authorization: Bearer`, `?token=` itself, or the cookie the `?token=` link sets, which
holds a value derived from the token, never the token). The event streams share one
watcher and are capped per client and in all (live.py)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mp_engine.views.status import seconds
from mp_engine.web import evals, graph, plots
from mp_engine.web.documents import Documents
from mp_engine.web.live import Feed, Watch

COOKIE = "mp_dashboard_session"
FRAGMENTS = ("state", "queue", "running")  # the index page's live parts, each a template `_<name>.html`
MAX_LIMIT = 5000
log = structlog.get_logger("mp_engine.dashboard")
# What every answer allows: the dashboard's own script, style and event stream; nothing
# inline (the templates have no inline script or style), no frames, no forms.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
]


def session_of(token: str) -> str:
    """The cookie's value: derived from the token (HMAC), so the cookie store, a proxy's
    log or a stolen cookie never shows the token itself; it changes with the token."""
    return hmac.new(token.encode(), b"mp-engine dashboard session", hashlib.sha256).hexdigest()


class SecurityHeaders:
    """ASGI middleware: SECURITY_HEADERS on every answer."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers if scope["type"] == "http" else send)


def templates() -> Environment:
    env = Environment(loader=PackageLoader("mp_engine.web", "templates"), autoescape=select_autoescape())
    env.filters["secs"] = lambda v: "-" if v is None else seconds(v)
    env.filters["short"] = lambda v, n=12: str(v)[:n] if v else ""
    env.globals.update(layout=graph.layout, durations=plots.durations, rates=plots.rates, spend=plots.spend)
    return env


class Dashboard:
    """The app for one workspace. `token`: required of every request when set. `hosts`:
    the Host values accepted besides loopback's. `stop`: set when the server shuts down
    (ends the event streams). `tick`: seconds between looks at the workspace. `streams`:
    (per client, in all), the most event streams open at once."""

    def __init__(
        self,
        docs: Documents,
        *,
        token: str | None = None,
        hosts: tuple[str, ...] = (),
        stop: threading.Event | None = None,
        tick: float = 0.5,
        on_refused: Callable[..., None] | None = None,
        streams: tuple[int, int] = (8, 32),
    ):
        self.docs, self.token, self.tick = docs, token, tick
        self.session = session_of(token) if token else ""
        self.stop = stop or threading.Event()
        self.env = templates()
        self.on_refused = on_refused or (lambda **kw: log.warning("dashboard_refused", **kw))
        self.feed = Feed(
            Watch(docs.ws), self._render, tick=tick, stop=self.stop, per_client=streams[0], total=streams[1]
        )
        static = Path(__file__).parent / "static"
        self.app = Starlette(
            routes=[
                Route("/", self.guarded(self.index)),
                Route("/history", self.guarded(self.history)),
                Route("/runs/{run_id}", self.guarded(self.run_page)),
                Route("/evals", self.guarded(self.evals_page)),
                Route("/evals/{name}", self.guarded(self.eval_page)),
                Route("/api/v1/state", self.guarded(self.api_state)),
                Route("/api/v1/runs", self.guarded(self.api_runs)),
                Route("/api/v1/runs/{run_id}", self.guarded(self.api_run)),
                Route("/api/v1/stream", self.guarded(self.stream)),
                Mount("/static", StaticFiles(directory=static), name="static"),
            ],
            middleware=[
                Middleware(SecurityHeaders),
                Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]", "::1", *hosts]),
            ],
        )

    # -- the guard -------------------------------------------------------------------------

    def guarded(self, endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def route(request: Request) -> Response:
            if self.token and not self._allowed(request):
                client = request.client.host if request.client else None
                self.on_refused(path=request.url.path, client=client, reason="no valid token")
                return refused()
            if self.token and request.query_params.get("token"):
                # a link with the token: a session cookie instead, and the token leaves the URL
                out = RedirectResponse(str(request.url.remove_query_params("token")), status_code=303)
                out.set_cookie(
                    COOKIE, self.session, httponly=True, samesite="strict", secure=request.url.scheme == "https"
                )
                return out
            if asyncio.iscoroutinefunction(endpoint):
                return await endpoint(request)
            return await run_in_threadpool(endpoint, request)

        return route

    def _allowed(self, request: Request) -> bool:
        assert self.token
        auth = request.headers.get("authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else request.query_params.get("token")
        if given is not None:
            return hmac.compare_digest(given.encode(), self.token.encode())
        return hmac.compare_digest(request.cookies.get(COOKIE, "").encode(), self.session.encode())

    # -- the API -----------------------------------------------------------------------------

    def api_state(self, request: Request) -> Response:
        return JSONResponse(self.docs.state())

    def api_runs(self, request: Request) -> Response:
        limit = limit_of(request)
        if isinstance(limit, Response):
            return limit
        return JSONResponse(self.docs.runs(limit))

    def api_run(self, request: Request) -> Response:
        doc = self.docs.run(request.path_params["run_id"])
        if doc is None:
            return JSONResponse({"error": "no such run", "fix": "take a run_id from /api/v1/runs"}, status_code=404)
        return JSONResponse(doc)

    # -- the pages ---------------------------------------------------------------------------

    def page(self, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**values), status_code=status)

    def fragments(self, doc: dict[str, Any]) -> dict[str, str]:
        return {name: self.env.get_template(f"_{name}.html").render(doc=doc) for name in FRAGMENTS}

    def index(self, request: Request) -> Response:
        doc = self.docs.state()
        return self.page("index.html", doc=doc, parts=self.fragments(doc), title="mp-engine")

    def history(self, request: Request) -> Response:
        limit = limit_of(request, default=1000)
        if isinstance(limit, Response):
            return limit
        return self.page("history.html", doc=self.docs.runs(limit), title="history")

    def run_page(self, request: Request) -> Response:
        doc = self.docs.run(request.path_params["run_id"])
        if doc is None:
            return self.page("missing.html", 404, run_id=request.path_params["run_id"], title="no such run")
        return self.page("run.html", doc=doc, title=doc["run_id"])

    def evals_page(self, request: Request) -> Response:
        where = self.docs.ws.rel(self.docs.ws.evals_dir)
        return self.page("evals.html", evals=evals.reports(self.docs.ws), where=where, title="evals")

    def eval_page(self, request: Request) -> Response:
        doc = evals.report(self.docs.ws, request.path_params["name"])
        if doc is None:
            return self.page("missing.html", 404, run_id=request.path_params["name"], what="eval", title="no such eval")
        return self.page("eval.html", doc=doc, title=f"eval {doc['name']}")

    # -- live ----------------------------------------------------------------------------------

    async def _render(self) -> tuple[dict[str, Any], str]:
        doc = await run_in_threadpool(self.docs.state)
        parts = await run_in_threadpool(self.fragments, doc)
        return doc, f"event: fragments\ndata: {json.dumps(parts)}\n\n"

    async def stream(self, request: Request) -> Response:
        """`event: fragments` with the index page's live parts (JSON: name -> HTML) when
        the workspace changed (live.py's one watcher says when); a comment every 15 s keeps
        proxies from closing the stream. 429 past the streams a client, or everyone, may hold."""
        client = request.client.host if request.client else "?"
        joined = self.feed.join(client)
        if joined is None:
            self.on_refused(path=request.url.path, client=client, reason="too many event streams open")
            body = "Too many live views are open: close a dashboard tab (the page still works, without live updates)."
            return Response(body, 429, headers={"Retry-After": "30"}, media_type="text/plain")
        key, queue = joined

        async def events():
            # A closed connection ends this generator: StreamingResponse listens for the
            # disconnect beside it (no per-tick `is_disconnected`, bench figure 19).
            try:
                while True:
                    try:
                        event = await asyncio.wait_for(queue.get(), 15.0)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    if event is None:
                        return
                    yield event
            finally:
                self.feed.leave(key)

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def limit_of(request: Request, default: int | None = 50) -> int | None | Response:
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        return JSONResponse({"error": f"limit must be 1..{MAX_LIMIT}", "fix": "?limit=50"}, status_code=400)
    return int(raw)


def refused() -> Response:
    return HTMLResponse(
        "<!doctype html><title>mp-engine: token needed</title><p>This dashboard needs its token: open the URL "
        "the engine printed (<code>...?token=...</code>), or send <code>Authorization: Bearer TOKEN</code>.</p>",
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="mp-engine dashboard"'},
    )
