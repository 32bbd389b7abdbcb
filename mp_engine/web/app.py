"""The dashboard's ASGI app (Starlette): the JSON API, the pages rendered from it, and a
server-sent event stream that pushes the pages' live parts when the workspace changes.

Read-only: no route changes anything; where an action is needed the page shows the
command. Every value that came from an MP or an agent is escaped by the templates
(Jinja2 with autoescape on). Requests must name a loopback host or the configured one
(no DNS rebinding), and, with a token, carry it (`Authorization: Bearer`, the cookie the
`?token=` link sets, or `?token=` itself)."""

from __future__ import annotations

import asyncio
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

from mp_engine.views.status import seconds
from mp_engine.web import graph, plots
from mp_engine.web.documents import Documents
from mp_engine.web.live import Watch

COOKIE = "mp_dashboard_token"
FRAGMENTS = ("state", "queue", "running")  # the index page's live parts, each a template `_<name>.html`
MAX_LIMIT = 5000
HISTORY_PAGE = 100  # runs the history page shows by default
log = structlog.get_logger("mp_engine.dashboard")


def templates() -> Environment:
    env = Environment(loader=PackageLoader("mp_engine.web", "templates"), autoescape=select_autoescape())
    env.filters["secs"] = lambda v: "-" if v is None else seconds(v)
    env.filters["short"] = lambda v, n=12: str(v)[:n] if v else ""
    env.globals.update(layout=graph.layout, durations=plots.durations, rates=plots.rates)
    return env


class Dashboard:
    """The app for one workspace. `token`: required of every request when set. `hosts`:
    the Host values accepted besides loopback's. `stop`: set when the server shuts down
    (ends the event streams). `tick`: seconds between looks at the workspace per stream."""

    def __init__(
        self,
        docs: Documents,
        *,
        token: str | None = None,
        hosts: tuple[str, ...] = (),
        stop: threading.Event | None = None,
        tick: float = 0.5,
        on_refused: Callable[..., None] | None = None,
    ):
        self.docs, self.token, self.tick = docs, token, tick
        self.stop = stop or threading.Event()
        self.env = templates()
        self.on_refused = on_refused or (lambda **kw: log.warning("dashboard_refused", **kw))
        static = Path(__file__).parent / "static"
        self.app = Starlette(
            routes=[
                Route("/", self.guarded(self.index)),
                Route("/history", self.guarded(self.history)),
                Route("/runs/{run_id}", self.guarded(self.run_page)),
                Route("/api/v1/state", self.guarded(self.api_state)),
                Route("/api/v1/runs", self.guarded(self.api_runs)),
                Route("/api/v1/runs/{run_id}", self.guarded(self.api_run)),
                Route("/api/v1/stream", self.guarded(self.stream)),
                Mount("/static", StaticFiles(directory=static), name="static"),
            ],
            middleware=[
                Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]", "::1", *hosts])
            ],
        )

    # -- the guard -------------------------------------------------------------------------

    def guarded(self, endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def route(request: Request) -> Response:
            if self.token:
                given = request.query_params.get("token") or request.cookies.get(COOKIE) or ""
                auth = request.headers.get("authorization", "")
                if auth.lower().startswith("bearer "):
                    given = auth[7:].strip()
                if not hmac.compare_digest(given.encode(), self.token.encode()):
                    client = request.client.host if request.client else None
                    self.on_refused(path=request.url.path, client=client, reason="no valid token")
                    return refused()
                if request.query_params.get(
                    "token"
                ):  # a link with the token: keep it in a cookie, drop it from the URL
                    out = RedirectResponse(str(request.url.remove_query_params("token")), status_code=303)
                    out.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
                    return out
            if asyncio.iscoroutinefunction(endpoint):
                return await endpoint(request)
            return await run_in_threadpool(endpoint, request)

        return route

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
        # The newest HISTORY_PAGE by default (?limit= for more): a page that showed every run
        # up to 1,000 cost 28 times as much at 10,000 runs as at 100 (bench figure 22).
        limit = limit_of(request, default=HISTORY_PAGE)
        if isinstance(limit, Response):
            return limit
        return self.page("history.html", doc=self.docs.runs(limit), title="history")

    def run_page(self, request: Request) -> Response:
        doc = self.docs.run(request.path_params["run_id"])
        if doc is None:
            return self.page("missing.html", 404, run_id=request.path_params["run_id"], title="no such run")
        return self.page("run.html", doc=doc, title=doc["run_id"])

    # -- live ----------------------------------------------------------------------------------

    async def stream(self, request: Request) -> Response:
        """`event: fragments` with the index page's live parts (JSON: name -> HTML) when
        the workspace changed, looked for every `tick` seconds; a comment every 15 s keeps
        proxies from closing the stream."""
        watch = Watch(self.docs.ws)

        async def events():
            quiet = 0.0
            # A closed connection ends this generator: StreamingResponse listens for the
            # disconnect beside it (no per-tick `is_disconnected`, bench figure 19).
            while not self.stop.is_set():
                if watch.changed():
                    doc = await run_in_threadpool(self.docs.state)
                    watch.follow(doc)
                    parts = await run_in_threadpool(self.fragments, doc)
                    yield f"event: fragments\ndata: {json.dumps(parts)}\n\n"
                    quiet = 0.0
                elif quiet >= 15.0:
                    yield ": keep-alive\n\n"
                    quiet = 0.0
                await asyncio.sleep(self.tick)
                quiet += self.tick

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
