"""Real git remotes over smart HTTP on loopback, behind a token, as GitHub serves them.

`git http-backend` (git's own CGI program) serves the bare repositories under one root;
this server only asks for `Authorization: Basic base64(x-access-token:TOKEN)` first, as
GitHub does for https remotes, and keeps every Authorization header and path it was sent.
`hold("git-receive-pack")` carries a push out and keeps git's answer until the test lets
it go: the moment to `kill -9` the engine whose push went through.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

from werkzeug.wrappers import Request, Response

from tests.forge.github_double import Hold, Server


class GitHttp:
    def __init__(self, root: Path, token: str):
        self.root = root
        self.expected = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
        self.seen: list[tuple[str, str]] = []  # (path, Authorization header or "")
        self.holds: list[Hold] = []
        self.server = Server(self._app)
        self.url = self.server.url

    def close(self) -> None:
        for h in self.holds:
            h.release.set()
        self.server.close()

    def hold(self, path: str, *, times: int = 1) -> Hold:
        self.holds.append(Hold(path, "POST", times))
        return self.holds[-1]

    def pushes(self, name: str) -> int:
        """The pushes to `name` that reached git (authenticated receive-pack requests)."""
        return sum(1 for p, a in self.seen if p == f"/{name}.git/git-receive-pack" and a == self.expected)

    def bare(self, name: str) -> Path:
        """A new bare repository `name`.git, with one commit on `main`."""
        path = self.root / f"{name}.git"
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "--bare", "-q", "-b", "main", str(path)], check=True)
        work = self.root / f"{name}-seed"
        subprocess.run(["git", "clone", "-q", str(path), str(work)], check=True, capture_output=True)
        (work / "README.md").write_text("# app\n")
        for cmd in (["add", "README.md"], ["commit", "-q", "-m", "first"], ["push", "-q", "origin", "HEAD:main"]):
            subprocess.run(["git", "-C", str(work), *cmd], check=True, capture_output=True)
        return path

    def _app(self, environ, start_response):
        req = Request(environ)
        auth = req.headers.get("Authorization", "")
        self.seen.append((req.path, auth))
        if auth != self.expected:
            resp = Response("auth required\n", status=401, headers={"WWW-Authenticate": 'Basic realm="GitHub"'})
            return resp(environ, start_response)
        cgi = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "x-access-token",  # http-backend takes pushes from an authenticated user
            "PATH_INFO": req.path,
            "REQUEST_METHOD": req.method,
            "QUERY_STRING": req.query_string.decode(),
            "CONTENT_TYPE": req.headers.get("Content-Type", ""),
            "HTTP_CONTENT_ENCODING": req.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": req.headers.get("Git-Protocol", ""),
        }
        proc = subprocess.run(["git", "http-backend"], input=req.get_data(), env=cgi, capture_output=True)
        head, _, body = proc.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, body = proc.stdout.partition(b"\n\n")
        status, headers = "200 OK", []
        for line in head.decode().splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        held = next((h for h in self.holds if h.matches(req.method, req.path)), None)
        if held is not None:
            held.wait()
        start_response(status, headers)
        return [body]
