"""A GitHub double: the REST endpoints the engine uses, served on loopback.

Every request is checked against GitHub's own OpenAPI description (tests/forge/openapi.py)
before it is answered, and every answer is built from that description's example for the
operation, with the double's state written over it, then checked against the answer's
schema too. What does not match is kept in `violations` (the tests' fixture fails on any)
and answered 400, so a client that sends what GitHub would not accept fails at once.

Beyond the endpoints: a token (401 otherwise), rate-limit headers that count down (a 304
counts nothing, as on GitHub), ETags and 304s, faults on demand (`inject`: 5xx, 401, 403
with the permission needed, the primary and the secondary rate limit with Retry-After), a
request carried out and its answer held back until the test lets it go (`hold`: the
moment to `kill -9` a client whose call went through), and the Actions job log behind a
redirect to another origin (`LogServer`), which records any `Authorization` header that
reaches it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.serving import make_server
from werkzeug.wrappers import Request as WRequest
from werkzeug.wrappers import Response as WResponse

from tests.forge import model, openapi

RULES = Map(
    [
        Rule("/repos/<owner>/<repo>/pulls", methods=["GET", "POST"], endpoint="pulls"),
        Rule("/repos/<owner>/<repo>/pulls/<int:number>", methods=["GET", "PATCH"], endpoint="pull"),
        Rule("/repos/<owner>/<repo>/pulls/<int:number>/comments", methods=["GET"], endpoint="review_comments"),
        Rule("/repos/<owner>/<repo>/pulls/<int:number>/reviews", methods=["GET"], endpoint="reviews"),
        Rule("/repos/<owner>/<repo>/pulls/<int:number>/merge", methods=["PUT"], endpoint="merge"),
        Rule("/repos/<owner>/<repo>/issues", methods=["GET"], endpoint="issues"),
        Rule("/repos/<owner>/<repo>/issues/<int:number>/comments", methods=["GET", "POST"], endpoint="comments"),
        Rule("/repos/<owner>/<repo>/issues/<int:number>/labels", methods=["POST"], endpoint="add_labels"),
        Rule("/repos/<owner>/<repo>/issues/<int:number>/labels/<path:name>", methods=["DELETE"], endpoint="label"),
        Rule("/repos/<owner>/<repo>/commits/<ref>/check-runs", methods=["GET"], endpoint="check_runs"),
        Rule("/repos/<owner>/<repo>/commits/<ref>/status", methods=["GET"], endpoint="status"),
        Rule("/repos/<owner>/<repo>/actions/jobs/<int:job>/logs", methods=["GET"], endpoint="job_logs"),
        Rule("/repos/<owner>/<repo>/collaborators/<user>/permission", methods=["GET"], endpoint="permission"),
    ],
    strict_slashes=False,
)
DOCS = "https://docs.github.com/rest"


@dataclass(frozen=True)
class Call:
    """One request the double answered."""

    method: str
    path: str
    query: str
    status: int
    counted: bool  # against the rate limit (a 304 is not)
    conditional: bool  # it carried If-None-Match
    at: float = 0.0  # time.time() when it was answered


@dataclass
class Hold:
    """The next `times` requests matching (after `skip` more) are carried out, then their
    answers wait for `release` (set by the test, or at close): `reached` says one is held."""

    path_contains: str
    method: str = ""
    times: int = 1
    skip: int = 0
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def matches(self, method: str, path: str) -> bool:
        if self.times > 0 and self.path_contains in path and self.method in ("", method):
            if self.skip > 0:
                self.skip -= 1
                return False
            self.times -= 1
            return True
        return False

    def wait(self) -> None:
        self.reached.set()
        self.release.wait(120)


@dataclass
class Fault:
    status: int
    times: int
    path_contains: str
    headers: dict[str, str]
    message: str
    after: bool = False  # the request is carried out, and its answer lost (a 502 from a proxy)
    method: str = ""  # only requests with this method ("" any)


@dataclass
class Served:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    operation: str | None = None  # validated against this operation's answer when set


class Server:
    """A WSGI app served on 127.0.0.1 in a thread."""

    def __init__(self, app):
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
        self._http = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._http.server_port}"
        self._thread = threading.Thread(target=self._http.serve_forever, name="github-double", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


class LogServer:
    """Where a job log's redirect points: another origin, like GitHub's blob storage."""

    def __init__(self, logs: dict[int, str]):
        self.logs, self.authorization_seen = logs, []
        self.server = Server(self._app)

    def _app(self, environ, start_response):
        req = WRequest(environ)
        if req.headers.get("Authorization"):
            self.authorization_seen.append(req.headers["Authorization"])
        job = int(req.path.rsplit("/", 1)[-1])
        text = self.logs.get(job)
        resp = WResponse(text or "", status=200 if text is not None else 404, content_type="text/plain")
        return resp(environ, start_response)


class GitHubDouble:
    """The double's state (`model.Repo` per `owner/repo`) and its HTTP face."""

    def __init__(self, token: str, *, prefix: str = "", rate_limit: int = 5000):
        self.token, self.prefix = token, prefix.rstrip("/")
        self.repos: dict[str, model.Repo] = {}
        self.violations: list[str] = []
        self.calls: list[Call] = []
        self.faults: list[Fault] = []
        self.holds: list[Hold] = []
        self.limit = self.remaining = rate_limit
        self.reset_at = int(time.time()) + 3600
        self.logs: dict[int, str] = {}
        self.heads: dict[tuple[str, str], str] = {}  # (slug, branch) -> sha, when no git remote is linked
        self.remotes: dict[str, str] = {}  # slug -> a bare repository the branches are read from
        self.ids = itertools.count(1000)
        self.lock = threading.RLock()
        self.log_server = LogServer(self.logs)
        self.server = Server(self._app)
        self.url = self.server.url + self.prefix

    def close(self) -> None:
        for h in self.holds:
            h.release.set()
        self.server.close()
        self.log_server.server.close()

    def hold(self, path: str, *, method: str = "", times: int = 1, skip: int = 0) -> Hold:
        """Carry out the next `times` requests whose path contains `path` (and with
        `method`), after `skip` more, and keep their answers until the test sets `release`."""
        with self.lock:
            self.holds.append(Hold(path, method, times, skip=skip))
            return self.holds[-1]

    def repo(self, slug: str) -> model.Repo:
        with self.lock:
            return self.repos.setdefault(slug, model.Repo(slug, self.ids))

    def inject(self, status: int, *, times=1, path="", headers=None, message="", after=False, method="") -> None:
        """The next `times` requests whose path contains `path` are answered `status`;
        `after`: carried out first, as a request whose answer was lost."""
        with self.lock:
            message = message or f"injected {status}"
            self.faults.append(Fault(status, times, path, dict(headers or {}), message, after, method))

    def exhaust_rate_limit(self, reset_in: int) -> None:
        """The primary limit is used up until `reset_in` seconds from now."""
        with self.lock:
            self.remaining, self.reset_at = 0, int(time.time()) + reset_in

    def head_sha(self, slug: str, branch: str) -> str:
        """The branch's tip: from the linked bare repository, else as set, else made up."""
        if bare := self.remotes.get(slug):
            proc = subprocess.run(
                ["git", "-C", bare, "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
                capture_output=True,
                text=True,
            )
            if proc.returncode == 0:
                return proc.stdout.strip()
        return self.heads.get((slug, branch)) or hashlib.sha1(branch.encode()).hexdigest()

    def counted(self) -> int:
        return sum(c.counted for c in self.calls)

    # --- HTTP ----------------------------------------------------------------------------

    def _app(self, environ, start_response):
        req = WRequest(environ)
        with self.lock:
            resp = self._answer(req)
            held = next((h for h in self.holds if h.matches(req.method, req.path)), None)
        if held is not None:
            held.wait()
        return resp(environ, start_response)

    def _answer(self, req: WRequest) -> WResponse:
        path = req.path
        if self.prefix and path.startswith(self.prefix):
            path = path[len(self.prefix) :]
        checked = openapi.Request(req.method, path, req.args, req.headers, req.get_data(), req.content_type or "")
        if found := openapi.problems(checked):
            self.violations.extend(found)
            return self._send(req, path, Served(400, {"message": "; ".join(found), "documentation_url": DOCS}))
        if not req.headers.get("User-Agent"):
            return self._send(req, path, Served(403, {"message": "Request forbidden: a User-Agent is required"}))
        if req.headers.get("Authorization") not in (f"token {self.token}", f"Bearer {self.token}"):
            return self._send(req, path, Served(401, {"message": "Bad credentials", "documentation_url": DOCS}))
        served = self._fault(req.method, path, after=False) or self._limited() or self._route(req, path)
        served = self._fault(req.method, path, after=True) or served
        if served.operation and 200 <= served.status < 300:
            answer = openapi.Response(served.status, json.dumps(served.body).encode(), {})
            self.violations.extend(openapi.problems(checked, answer))
        return self._send(req, path, served)

    def _fault(self, method: str, path: str, *, after: bool) -> Served | None:
        for fault in self.faults:
            if (
                fault.times > 0
                and fault.path_contains in path
                and fault.after == after
                and fault.method in ("", method)
            ):
                fault.times -= 1
                body = {"message": fault.message, "documentation_url": DOCS, "status": str(fault.status)}
                return Served(fault.status, body, fault.headers)
        return None

    def _limited(self) -> Served | None:
        if self.remaining == 0 and time.time() >= self.reset_at:  # as GitHub: a new window at the reset
            self.remaining, self.reset_at = self.limit, int(time.time()) + 3600
        if self.remaining > 0:
            return None
        body = {"message": "API rate limit exceeded for user ID 1.", "documentation_url": DOCS, "status": "403"}
        return Served(403, body)

    def _route(self, req: WRequest, path: str) -> Served:
        try:
            endpoint, args = RULES.bind("api.github.com").match(path, method=req.method)
        except HTTPException:
            return Served(404, {"message": "Not Found", "documentation_url": DOCS})
        slug = f"{args.pop('owner')}/{args.pop('repo')}"
        if slug not in self.repos:
            return Served(404, {"message": "Not Found", "documentation_url": DOCS})
        body = req.get_json(silent=True) or {}
        try:
            return getattr(self.repos[slug], f"{endpoint}_{req.method.lower()}")(self, req.args, body, **args)
        except NotFound:
            return Served(404, {"message": "Not Found", "documentation_url": DOCS})

    def _send(self, req: WRequest, path: str, served: Served) -> WResponse:
        text = "" if served.body is None else json.dumps(served.body)
        etag = '"' + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'
        conditional = bool(req.headers.get("If-None-Match"))
        status = served.status
        if req.method == "GET" and status == 200 and conditional and req.headers["If-None-Match"] == etag:
            status, text = 304, ""
        counted = status != 304 and served.status != 401
        if counted and self.remaining > 0:
            self.remaining -= 1
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_at),
            "X-RateLimit-Used": str(self.limit - self.remaining),
            "X-RateLimit-Resource": "core",
            "X-GitHub-Request-Id": f"DOUBLE:{len(self.calls)}",
            "Cache-Control": "private, max-age=60, s-maxage=60",
            "Vary": "Accept, Authorization, Cookie, X-GitHub-OTP",
            **served.headers,
        }
        if req.method == "GET" and served.status == 200:
            headers["ETag"] = etag
        self.calls.append(Call(req.method, path, req.query_string.decode(), status, counted, conditional, time.time()))
        mimetype = "application/json" if text else None
        return WResponse(text if status != 304 else b"", status=status, headers=headers, mimetype=mimetype)
