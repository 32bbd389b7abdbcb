"""`mp-engine mcp clients [add]` and `mp-engine mcp revoke CLIENT_ID`: the OAuth clients in
the server's store, seen and changed from the command line (a running server sees a change
at its next request)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from mcp.shared.auth import OAuthClientInformationFull

from mp_engine.client.mcp.provider import SCOPES
from mp_engine.client.mcp.store import Store
from mp_engine.core.exitcodes import ExitCode


def list_clients(store: Path, as_json: bool, echo: Callable[[str], None]) -> ExitCode:
    rows = Store(store).clients()
    if as_json:
        echo(json.dumps(rows, indent=2))
        return ExitCode.OK
    if not rows:
        echo(f"no clients in {store}")
        return ExitCode.OK
    for r in rows:
        echo(
            f"{r['client_id']}  {r.get('client_name') or '(unnamed)'}  scopes {r.get('scope') or '-'}  "
            f"added {_when(r['created'])}  last used {_when(r['last_used'])}"
        )
    return ExitCode.OK


def add_client(
    store: Path, name: str, redirect_uri: str, scope: str, auth_method: str, echo: Callable[[str], None]
) -> ExitCode:
    """A confidential client registered by hand (a Custom GPT's Action): print its id and
    secret, which are not shown again."""
    client_id, secret = f"mpc-{secrets.token_urlsafe(12)}", secrets.token_urlsafe(32)
    info = OAuthClientInformationFull(
        client_id=client_id,
        client_secret=secret,
        client_id_issued_at=int(time.time()),
        client_secret_expires_at=0,
        client_name=name,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=auth_method,  # type: ignore[arg-type]
        scope=scope,
    )
    Store(store).add_client(info.model_dump(mode="json", exclude_none=True))
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


def _when(epoch: float | None) -> str:
    if not epoch:
        return "never"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


DEFAULT_SCOPE = " ".join(SCOPES)
