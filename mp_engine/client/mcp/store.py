"""The OAuth state of `mp-engine mcp` that survives restarts, in one SQLite file (mode 0600,
default `~/.local/state/mp-engine/mcp.sqlite3`): registered clients, authorization codes,
access and refresh tokens, consent requests waiting for the owner, and passphrase failures
per address.

Tokens and codes are kept as SHA-256 hashes, never as given out: a copy of the file lets no
one call the server. (Client secrets are kept as issued: the MCP SDK's client
authentication compares them, in constant time, with what the client sends.) An access
token and the refresh token issued with it share a `grant`: revoking or rotating either
ends both. Every call opens its own connection, so the CLI (`mcp clients`, `mcp revoke`)
and a running server share the file safely.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STORE_ENV = "MP_ENGINE_MCP_STORE"
LOCKOUT_FAILURES = 5
LOCKOUT_SECONDS = 15 * 60

SCHEMA = """
CREATE TABLE IF NOT EXISTS clients (
    client_id TEXT PRIMARY KEY, info TEXT NOT NULL, created REAL NOT NULL, last_used REAL);
CREATE TABLE IF NOT EXISTS codes (
    hash TEXT PRIMARY KEY, client_id TEXT NOT NULL, data TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
    hash TEXT PRIMARY KEY, kind TEXT NOT NULL, client_id TEXT NOT NULL, grant_id TEXT NOT NULL,
    scopes TEXT NOT NULL, resource TEXT, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS pending (
    id TEXT PRIMARY KEY, client_id TEXT NOT NULL, data TEXT NOT NULL, csrf TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS failures (address TEXT PRIMARY KEY, count INTEGER NOT NULL, locked_until REAL);
"""


def default_path() -> Path:
    """$MP_ENGINE_MCP_STORE, else $XDG_STATE_HOME/mp-engine/mcp.sqlite3 (~/.local/state)."""
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV]).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "mp-engine" / "mcp.sqlite3"


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class TokenRow:
    kind: str  # "access" or "refresh"
    client_id: str
    grant_id: str
    scopes: list[str]
    resource: str | None
    expires_at: float


class Store:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))  # created 0600 before SQLite opens it
        os.chmod(path, 0o600)
        with self._db() as db:
            db.executescript(SCHEMA)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:  # one transaction: committed, or rolled back on an exception
                yield db
        finally:
            db.close()

    # -- clients -----------------------------------------------------------------------

    def add_client(self, info: dict[str, Any]) -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO clients (client_id, info, created) VALUES (?, ?, ?)",
                (info["client_id"], json.dumps(info), time.time()),
            )

    def client(self, client_id: str) -> dict[str, Any] | None:
        with self._db() as db:
            row = db.execute("SELECT info FROM clients WHERE client_id = ?", (client_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def clients(self) -> list[dict[str, Any]]:
        """Every client with `created` and `last_used` (epoch seconds, None if never)."""
        with self._db() as db:
            rows = db.execute("SELECT info, created, last_used FROM clients ORDER BY created").fetchall()
        return [{**json.loads(info), "created": created, "last_used": used} for info, created, used in rows]

    def revoke_client(self, client_id: str) -> bool:
        """Forget the client, its codes and its tokens; False when there was none."""
        with self._db() as db:
            gone = db.execute("DELETE FROM clients WHERE client_id = ?", (client_id,)).rowcount
            for table in ("codes", "tokens", "pending"):
                db.execute(f"DELETE FROM {table} WHERE client_id = ?", (client_id,))  # noqa: S608 - fixed names
        return gone > 0

    def touch(self, client_id: str, now: float) -> None:
        with self._db() as db:
            db.execute("UPDATE clients SET last_used = ? WHERE client_id = ?", (now, client_id))

    # -- consent requests and codes ----------------------------------------------------

    def add_pending(self, request_id: str, client_id: str, data: dict[str, Any], csrf: str, ttl: float) -> None:
        with self._db() as db:
            db.execute("DELETE FROM pending WHERE expires_at < ?", (time.time(),))
            db.execute(
                "INSERT INTO pending VALUES (?, ?, ?, ?, ?)",
                (request_id, client_id, json.dumps(data), csrf, time.time() + ttl),
            )

    def pending(self, request_id: str) -> tuple[str, dict[str, Any], str] | None:
        """(client id, the authorization parameters, CSRF token) of a live consent request."""
        with self._db() as db:
            row = db.execute(
                "SELECT client_id, data, csrf FROM pending WHERE id = ? AND expires_at >= ?", (request_id, time.time())
            ).fetchone()
        return (row[0], json.loads(row[1]), row[2]) if row else None

    def drop_pending(self, request_id: str) -> None:
        with self._db() as db:
            db.execute("DELETE FROM pending WHERE id = ?", (request_id,))

    def add_code(self, code: str, client_id: str, data: dict[str, Any]) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO codes VALUES (?, ?, ?, ?)", (digest(code), client_id, json.dumps(data), data["expires_at"])
            )

    def code(self, code: str, client_id: str) -> dict[str, Any] | None:
        with self._db() as db:
            row = db.execute(
                "SELECT data FROM codes WHERE hash = ? AND client_id = ?", (digest(code), client_id)
            ).fetchone()
        return json.loads(row[0]) if row else None

    def take_code(self, code: str) -> bool:
        """Delete the code; False when it was already used (a code works once)."""
        with self._db() as db:
            return db.execute("DELETE FROM codes WHERE hash = ?", (digest(code),)).rowcount > 0

    # -- tokens --------------------------------------------------------------------------

    def add_token(self, token: str, row: TokenRow) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    digest(token),
                    row.kind,
                    row.client_id,
                    row.grant_id,
                    " ".join(row.scopes),
                    row.resource,
                    row.expires_at,
                ),
            )

    def token(self, token: str, kind: str) -> TokenRow | None:
        """A live token of this kind whose client is still registered."""
        with self._db() as db:
            row = db.execute(
                "SELECT t.kind, t.client_id, t.grant_id, t.scopes, t.resource, t.expires_at FROM tokens t "
                "JOIN clients c ON c.client_id = t.client_id WHERE t.hash = ? AND t.kind = ? AND t.expires_at >= ?",
                (digest(token), kind, time.time()),
            ).fetchone()
        if row is None:
            return None
        return TokenRow(row[0], row[1], row[2], row[3].split(), row[4], row[5])

    def end_grant(self, grant_id: str) -> int:
        """Delete the access and refresh tokens of one grant; how many there were."""
        with self._db() as db:
            db.execute("DELETE FROM tokens WHERE expires_at < ?", (time.time(),))
            return db.execute("DELETE FROM tokens WHERE grant_id = ?", (grant_id,)).rowcount

    # -- passphrase failures per address ---------------------------------------------------

    def locked_until(self, address: str, now: float) -> float | None:
        with self._db() as db:
            row = db.execute("SELECT locked_until FROM failures WHERE address = ?", (address,)).fetchone()
        return row[0] if row and row[0] and row[0] > now else None

    def fail(self, address: str, now: float) -> int:
        """Count a wrong passphrase; the fifth in a row locks the address out for 15 minutes.
        Returns the failures counted so far (0 once it locked, the count starts over)."""
        with self._db() as db:
            row = db.execute("SELECT count FROM failures WHERE address = ?", (address,)).fetchone()
            count = (row[0] if row else 0) + 1
            locked = now + LOCKOUT_SECONDS if count >= LOCKOUT_FAILURES else None
            db.execute("INSERT OR REPLACE INTO failures VALUES (?, ?, ?)", (address, 0 if locked else count, locked))
        return 0 if locked else count

    def succeed(self, address: str) -> None:
        with self._db() as db:
            db.execute("DELETE FROM failures WHERE address = ?", (address,))
