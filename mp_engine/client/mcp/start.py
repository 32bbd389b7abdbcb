"""`mp-engine mcp`: from the command line's options to a running server, or a one-line
refusal with the fix (exit 2)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from mp_engine.client.mcp.gate.limits import LIMITS_ENV, Limits
from mp_engine.client.mcp.gate.peer import TRUSTED_PROXY_ENV, TrustedProxies
from mp_engine.client.mcp.guard import PUBLIC_URL_ENV, resolve
from mp_engine.client.mcp.server import HttpAuth, serve_http, serve_stdio
from mp_engine.client.orchestrate import Orchestrator
from mp_engine.config.section import is_loopback
from mp_engine.core.errors import ConfigError
from mp_engine.core.exitcodes import ExitCode

TOKEN_ENV = "MP_ENGINE_MCP_TOKEN"
PASSPHRASE_ENV = "MP_ENGINE_MCP_PASSPHRASE"
MIN_PASSPHRASE = 12


@dataclass(frozen=True)
class Secrets:
    """Where the static token and the owner passphrase come from."""

    token: str | None = None  # --token (shows in `ps`)
    token_file: Path | None = None
    passphrase_file: Path | None = None


@dataclass(frozen=True)
class Exposure:
    """What the HTTP side answers to, and how much it lets anyone do."""

    public_url: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    trusted_proxies: tuple[str, ...] = ()
    limits: tuple[str, ...] = field(default_factory=tuple)  # NAME=VALUE pairs


def serve(
    repo: str,
    branch: str,
    http: str | None,
    err: Callable[[str], None],
    *,
    secrets_from: Secrets = Secrets(),
    exposure: Exposure = Exposure(),
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
    try:
        auth = _http_auth(host, int(port_text), secrets_from, exposure, store, access_ttl, err)
    except (ConfigError, ValueError) as e:
        err(f"mp-engine mcp: {e}")
        return ExitCode.USAGE
    if auth is None:
        return ExitCode.USAGE
    public = auth.public
    err(f"mp-engine mcp: serving {repo} ({branch}) at {public.url}/mcp (bound to {host}:{port_text})")
    if auth.passphrase is not None:
        err(f"mp-engine mcp: OAuth on (consent with the owner passphrase); clients and tokens in {store}")
    else:
        err(f"mp-engine mcp: OAuth off (ChatGPT and Claude.ai need it): set {PASSPHRASE_ENV} to turn it on")
    if not auth.proxies and not is_loopback(urlsplit(public.url).hostname or ""):
        err(
            f"mp-engine mcp: no --trusted-proxy: every client behind the tunnel shares its address, so wrong "
            "passphrases are counted per request, client and server, not per address. If the tunnel sets "
            f"X-Forwarded-For, give the address it connects from (--trusted-proxy 127.0.0.1 or {TRUSTED_PROXY_ENV})."
        )
    err(f"mp-engine mcp: GPT Action schema at {public.url}/openapi.json")
    serve_http(orch, auth, host, int(port_text))
    return ExitCode.OK


def _http_auth(
    host: str,
    port: int,
    given: Secrets,
    exposure: Exposure,
    store: Path,
    access_ttl: int,
    err: Callable[[str], None],
) -> HttpAuth | None:
    """The HTTP side's settings; None after saying why there are none (ConfigError,
    ValueError: an option is wrong)."""
    public = resolve(exposure.public_url or os.environ.get(PUBLIC_URL_ENV), host, port, exposure.allowed_hosts)
    proxies = exposure.trusted_proxies or tuple(os.environ.get(TRUSTED_PROXY_ENV, "").split())
    limits = Limits.parse(exposure.limits or os.environ.get(LIMITS_ENV, "").split())
    passphrase = _passphrase(given.passphrase_file, err)
    if passphrase is False:
        return None
    token = given.token or os.environ.get(TOKEN_ENV)
    if given.token_file is not None:
        token = _secret_file(given.token_file, "--token-file", err)
        if token is None:
            return None
    if not token and passphrase is None:
        if not is_loopback(host):
            err(
                f"mp-engine mcp: refusing to serve on {host} without a token or OAuth: anyone who can reach it "
                f"could run commands on the engine host. Set {TOKEN_ENV} (or --token-file), or an owner passphrase "
                f"(--owner-passphrase-file or {PASSPHRASE_ENV}) for OAuth, or bind to 127.0.0.1."
            )
            return None
        token = secrets.token_urlsafe(24)
        err(f"mp-engine mcp: no token given; this run's bearer token is {token}")
    assert passphrase is not True
    return HttpAuth(public, token or None, passphrase, store, access_ttl, TrustedProxies(proxies), limits)


def _secret_file(path: Path, option: str, err: Callable[[str], None]) -> str | None:
    """A secret read from a file only its owner may read; None after saying why not."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        err(f"mp-engine mcp: cannot read {option} {path}: {e.strerror}")
        return None
    if path.stat().st_mode & 0o077:
        err(f"mp-engine mcp: {path} is readable by others; `chmod 600 {path}` first")
        return None
    return text


def _passphrase(path: Path | None, err: Callable[[str], None]) -> str | None | bool:
    """The owner passphrase (None: OAuth off; False: refused, with the reason said)."""
    if path is not None:
        text = _secret_file(path, "--owner-passphrase-file", err)
        if text is None:
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
