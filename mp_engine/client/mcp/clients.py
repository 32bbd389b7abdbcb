"""`mp-engine mcp clients [add]`, `mp-engine mcp revoke CLIENT_ID` and `mp-engine mcp
approve-login`: the OAuth clients and waiting sign-ins in the server's store, seen and
changed from the command line on the host (a running server sees a change at its next
request)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from mcp.shared.auth import OAuthClientInformationFull

from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.client.mcp.gate.registration import redirect_uri_problem
from mp_engine.client.mcp.provider import READ, SCOPES
from mp_engine.client.mcp.store import Store
from mp_engine.core.exitcodes import ExitCode


def list_clients(store: Path, limit_pairs: tuple[str, ...], as_json: bool, echo: Callable[[str], None]) -> ExitCode:
    """Every client; one the owner never allowed says when it is forgotten (it expires
    `unconsented_client_s` after it registered, issue #46)."""
    ttl = Limits.parse(limit_pairs).unconsented_client_s
    rows = Store(store).clients()
    for r in rows:
        r["forgotten_at"] = None if r["consented"] else r["created"] + ttl
    if as_json:
        echo(json.dumps(rows, indent=2))
        return ExitCode.OK
    if not rows:
        echo(f"no clients in {store}")
        return ExitCode.OK
    for r in rows:
        allowed = (
            f"allowed {_when(r['consented'])}"
            if r["consented"]
            else f"never allowed: forgotten at {_when(r['forgotten_at'])}"
        )
        origin = f"  from {r['address']}" if r.get("address") else ""
        echo(
            f"{r['client_id']}  {r.get('client_name') or '(unnamed)'}  scopes {r.get('scope') or '-'}  "
            f"added {_when(r['created'])}{origin}  {allowed}  last used {_when(r['last_used'])}"
        )
    return ExitCode.OK


def add_client(
    store: Path,
    name: str,
    redirect_uri: str,
    scope: str,
    auth_method: str,
    echo: Callable[[str], None],
    err: Callable[[str], None],
) -> ExitCode:
    """A confidential client registered by hand (a Custom GPT's Action): print its id and
    secret, which are not shown again. The owner added it: it counts as allowed."""
    problem = redirect_uri_problem(redirect_uri, private_use=True)
    if problem is not None:
        err(f"mp-engine mcp clients add: {problem}")
        return ExitCode.USAGE
    client_id, secret = f"mpc-{secrets.token_urlsafe(12)}", secrets.token_urlsafe(32)
    info = OAuthClientInformationFull(
        client_id=client_id,
        client_secret=secret,
        client_id_issued_at=int(time.time()),
        client_secret_expires_at=0,
        client_name=name,
        redirect_uris=[redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=auth_method,
        scope=scope,
    )
    Store(store).add_client(info.model_dump(mode="json", exclude_none=True), consented=True)
    echo(f"client_id:     {client_id}")
    echo(f"client_secret: {secret}")
    echo(f"scopes:        {scope}")
    echo("Keep the secret now: it is not shown again (`mp-engine mcp revoke` removes the client).")
    return ExitCode.OK


def revoke(store: Path, client_id: str, echo: Callable[[str], None], err: Callable[[str], None]) -> ExitCode:
    if not Store(store).revoke_client(client_id):
        err(f"mp-engine mcp revoke: no client {client_id} in {store} (`mp-engine mcp clients` lists them)")
        return ExitCode.USAGE
    echo(f"revoked {client_id}: the client and all its tokens no longer work")
    return ExitCode.OK


def approve_login(
    store: Path, request: str | None, read_only: bool, echo: Callable[[str], None], err: Callable[[str], None]
) -> ExitCode:
    """List the sign-ins waiting for the owner, or approve the one `request` starts."""
    db = Store(store)
    waiting = db.pendings(request or "")
    if request is None or len(waiting) != 1:
        if request is not None:
            what = "no sign-in waits" if not waiting else f"{len(waiting)} sign-ins wait"
            err(f"mp-engine mcp approve-login: {what} under {request!r}; give more of the id the page shows")
        elif not waiting:
            echo(f"no sign-in waits in {store} (a sign-in waits 10 minutes on its consent page)")
        for p in waiting:
            name = (db.client(p.client_id) or {}).get("client_name") or "(unnamed)"
            echo(
                f"{p.id[:10]}  {name} (client {p.client_id})  scopes {' '.join(p.params['scopes'])}  "
                f"back to {p.params['redirect_uri']}  until {_when(p.expires_at)}"
            )
        return ExitCode.OK if request is None else ExitCode.USAGE
    pending = waiting[0]
    scopes = [READ] if read_only else list(pending.params["scopes"])
    db.approve_pending(pending.id, scopes)
    name = (db.client(pending.client_id) or {}).get("client_name") or "(unnamed)"
    echo(f"approved {pending.id[:10]} for {name} (client {pending.client_id}), scopes {' '.join(scopes)}:")
    echo("the browser on its consent page moves on to the client within 10 seconds (or reload the page).")
    return ExitCode.OK


def _when(epoch: float | None) -> str:
    if not epoch:
        return "never"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


DEFAULT_SCOPE = " ".join(SCOPES)
