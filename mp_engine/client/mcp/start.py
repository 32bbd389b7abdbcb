"""`mp-engine mcp`: from the command line's options to a running server, or a one-line
refusal with the fix (exit 2)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

from mp_engine.client.mcp.guard import PUBLIC_URL_ENV, resolve
from mp_engine.client.mcp.server import HttpAuth, serve_http, serve_stdio
from mp_engine.client.orchestrate import Orchestrator
from mp_engine.config.section import is_loopback
from mp_engine.core.exitcodes import ExitCode

TOKEN_ENV = "MP_ENGINE_MCP_TOKEN"
PASSPHRASE_ENV = "MP_ENGINE_MCP_PASSPHRASE"
MIN_PASSPHRASE = 12


def serve(
    repo: str,
    branch: str,
    http: str | None,
    token: str | None,
    err: Callable[[str], None],
    *,
    public_url: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    passphrase_file: Path | None = None,
    store: Path,
    access_ttl: int = 3600,
) -> ExitCode:
    """Serve until the client goes (stdio) or SIGINT/SIGTERM (HTTP)."""
    orch = Orchestrator(repo, branch)
    if http is None:
        serve_stdio(orch)
        return ExitCode.OK
    host, _, port_text = http.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit():
        err(f"mp-engine mcp: --http wants HOST:PORT (like 127.0.0.1:8765), not {http!r}")
        return ExitCode.USAGE
    port = int(port_text)
    try:
        public = resolve(public_url or os.environ.get(PUBLIC_URL_ENV), host, port, allowed_hosts)
    except ValueError as e:
        err(f"mp-engine mcp: {e}")
        return ExitCode.USAGE
    passphrase = _passphrase(passphrase_file, err)
    if passphrase is False:
        return ExitCode.USAGE
    token = token or os.environ.get(TOKEN_ENV)
    if not token and passphrase is None:
        if not is_loopback(host):
            err(
                f"mp-engine mcp: refusing to serve on {host} without a token or OAuth: anyone who can reach it "
                f"could run commands on the engine host. Set {TOKEN_ENV} (or --token), or an owner passphrase "
                f"(--owner-passphrase-file or {PASSPHRASE_ENV}) for OAuth, or bind to 127.0.0.1."
            )
            return ExitCode.USAGE
        token = secrets.token_urlsafe(24)
        err(f"mp-engine mcp: no token given; this run's bearer token is {token}")
    err(f"mp-engine mcp: serving {repo} ({branch}) at {public.url}/mcp (bound to {host}:{port})")
    if passphrase is not None:
        err(f"mp-engine mcp: OAuth on (consent with the owner passphrase); clients and tokens in {store}")
    else:
        err(f"mp-engine mcp: OAuth off (ChatGPT and Claude.ai need it): set {PASSPHRASE_ENV} to turn it on")
    err(f"mp-engine mcp: GPT Action schema at {public.url}/openapi.json")
    serve_http(orch, HttpAuth(public, token or None, passphrase, store, access_ttl), host, port)
    return ExitCode.OK


def _passphrase(path: Path | None, err: Callable[[str], None]) -> str | None | bool:
    """The owner passphrase (None: OAuth off; False: refused, with the reason said)."""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as e:
            err(f"mp-engine mcp: cannot read --owner-passphrase-file {path}: {e.strerror}")
            return False
        if path.stat().st_mode & 0o077:
            err(f"mp-engine mcp: {path} is readable by others; `chmod 600 {path}` first")
            return False
    else:
        text = os.environ.get(PASSPHRASE_ENV, "").strip()
        if not text:
            return None
    if len(text) < MIN_PASSPHRASE:
        err(
            f"mp-engine mcp: the owner passphrase has {len(text)} characters; give at least {MIN_PASSPHRASE} "
            "(it is all that stands between the internet and a shell on the engine host)"
        )
        return False
    return text
