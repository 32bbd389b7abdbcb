"""The OAuth state of `mp-engine mcp` that survives restarts, in one SQLite file (mode 0600,
default `~/.local/state/mp-engine/mcp.sqlite3`): registered clients, authorization codes,
access and refresh tokens, consent requests waiting for the owner, and the strikes of wrong
passphrases (gate/lockout.py decides what they mean).

Tokens and codes are kept as SHA-256 hashes, never as given out: a copy of the file lets no
one call the server. (Client secrets are kept as issued: the MCP SDK's client
authentication compares them, in constant time, with what the client sends.) An access
token and the refresh token issued with it share a `grant`: rotating or revoking the pair
ends both. Every token issued from one consent shares a `family` (OAuth 2.1 §4.3.1): a used
code or a rotated refresh token stays behind as a marker, so its reuse can end the family.
Every call opens its own connection, so the CLI (`mcp clients`, `mcp revoke`, `mcp
approve-login`) and a running server share the file safely.
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
CREATE TABLE IF NOT EXISTS strikes (
    key TEXT PRIMARY KEY, count INTEGER NOT NULL, until REAL, trips INTEGER NOT NULL, updated REAL NOT NULL);
DROP TABLE IF EXISTS failures;
"""
# Columns added by issue #46, with what a store from before gets: a client that got a token
# was allowed (the others expire like new ones); its pairs are families of their own.
COLUMNS = [
    (
        "clients",
        "consented REAL",
        "UPDATE clients SET consented = created WHERE last_used IS NOT NULL OR client_id IN (SELECT client_id FROM tokens)",
    ),
    ("clients", "address TEXT", ""),
    ("codes", "family TEXT", ""),
    ("tokens", "family TEXT", "UPDATE tokens SET family = grant_id"),
    ("tokens", "rotated REAL", ""),
    ("pending", "approved TEXT", ""),
]


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
    grant_id: str  # the pair
    scopes: list[str]
    resource: str | None
    expires_at: float
    family: str = ""  # every token from one consent; "" means the pair's own


@dataclass(frozen=True)
class Pending:
    """A consent request waiting for the owner."""

    id: str
    client_id: str
    params: dict[str, Any]  # the authorization request's parameters
    csrf: str
    expires_at: float
    approved: list[str] | None  # the scopes `mcp approve-login` granted on the host


class Store:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))  # created 0600 before SQLite opens it
        os.chmod(path, 0o600)
        with self._db() as db:
            db.executescript(SCHEMA)
            for table, column, then in COLUMNS:
                have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                if column.split()[0] not in have:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
                    if then:
                        db.execute(then)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:  # one transaction: committed, or rolled back on an exception
                yield db
        finally:
            db.close()

    # -- clients -----------------------------------------------------------------------

    def add_client(self, info: dict[str, Any], *, address: str | None = None, consented: bool = False) -> None:
        now = time.time()
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO clients (client_id, info, created, consented, address) VALUES (?, ?, ?, ?, ?)",
                (info["client_id"], json.dumps(info), now, now if consented else None, address),
            )

    def client(self, client_id: str) -> dict[str, Any] | None:
        with self._db() as db:
            row = db.execute("SELECT info FROM clients WHERE client_id = ?", (client_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def clients(self) -> list[dict[str, Any]]:
        """Every client with `created`, `last_used`, `consented` (epoch seconds, None if
        never) and the `address` it registered from."""
        with self._db() as db:
            rows = db.execute(
                "SELECT info, created, last_used, consented, address FROM clients ORDER BY created"
            ).fetchall()
        return [
            {**json.loads(info), "created": created, "last_used": used, "consented": consented, "address": address}
            for info, created, used, consented, address in rows
        ]

    def consented(self, client_id: str) -> bool:
        with self._db() as db:
            row = db.execute("SELECT consented FROM clients WHERE client_id = ?", (client_id,)).fetchone()
        return bool(row and row[0])

    def consent(self, client_id: str) -> None:
        """The owner allowed this client (once is enough: it is no longer forgotten)."""
        with self._db() as db:
            db.execute(
                "UPDATE clients SET consented = COALESCE(consented, ?) WHERE client_id = ?", (time.time(), client_id)
            )

    def forget_unconsented(self, before: float) -> int:
        """Remove the clients registered before `before` that no one ever allowed."""
        with self._db() as db:
            ids = [
                r[0]
                for r in db.execute("SELECT client_id FROM clients WHERE consented IS NULL AND created < ?", (before,))
            ]
        return sum(self.revoke_client(i) for i in ids)

    def registered(self, since: float) -> list[tuple[float, str | None]]:
        """(when, from which address) of each client registered since `since`."""
        with self._db() as db:
            return [
                (r[0], r[1]) for r in db.execute("SELECT created, address FROM clients WHERE created >= ?", (since,))
            ]

    def count_clients(self) -> int:
        with self._db() as db:
            return int(db.execute("SELECT COUNT(*) FROM clients").fetchone()[0])

    def revoke_client(self, client_id: str) -> bool:
        """Forget the client, its codes, tokens and consent requests; False when there was none."""
        with self._db() as db:
            gone = db.execute("DELETE FROM clients WHERE client_id = ?", (client_id,)).rowcount
            for table in ("codes", "tokens", "pending"):
                db.execute(f"DELETE FROM {table} WHERE client_id = ?", (client_id,))  # noqa: S608 - fixed names
            db.execute("DELETE FROM strikes WHERE key = ?", (f"client:{client_id}",))
        return gone > 0

    def touch(self, client_id: str, now: float) -> None:
        with self._db() as db:
            db.execute("UPDATE clients SET last_used = ? WHERE client_id = ?", (now, client_id))

    # -- consent requests and codes ----------------------------------------------------

    def add_pending(
        self, request_id: str, client_id: str, data: dict[str, Any], csrf: str, ttl: float, keep: int = 10
    ) -> None:
        """Park a consent request; a client keeps at most `keep` (the oldest go)."""
        now = time.time()
        with self._db() as db:
            db.execute("DELETE FROM pending WHERE expires_at < ?", (now,))
            db.execute(
                "DELETE FROM pending WHERE id IN (SELECT id FROM pending WHERE client_id = ? "
                "ORDER BY expires_at DESC LIMIT -1 OFFSET ?)",
                (client_id, max(0, keep - 1)),
            )
            db.execute(
                "INSERT INTO pending (id, client_id, data, csrf, expires_at) VALUES (?, ?, ?, ?, ?)",
                (request_id, client_id, json.dumps(data), csrf, now + ttl),
            )

    def pending(self, request_id: str) -> Pending | None:
        """A live consent request."""
        found = self.pendings(request_id)
        return found[0] if len(found) == 1 and found[0].id == request_id else None

    def pendings(self, prefix: str = "") -> list[Pending]:
        """The live consent requests whose id starts with `prefix`, oldest first."""
        with self._db() as db:
            rows = db.execute(
                "SELECT id, client_id, data, csrf, expires_at, approved FROM pending "
                "WHERE substr(id, 1, ?) = ? AND expires_at >= ? ORDER BY expires_at",
                (len(prefix), prefix, time.time()),
            ).fetchall()
        return [Pending(r[0], r[1], json.loads(r[2]), r[3], r[4], json.loads(r[5]) if r[5] else None) for r in rows]

    def approve_pending(self, request_id: str, scopes: list[str]) -> None:
        with self._db() as db:
            db.execute("UPDATE pending SET approved = ? WHERE id = ?", (json.dumps(scopes), request_id))

    def drop_pending(self, request_id: str) -> None:
        with self._db() as db:
            db.execute("DELETE FROM pending WHERE id = ?", (request_id,))
            db.execute("DELETE FROM strikes WHERE key = ?", (f"request:{request_id}",))

    def add_code(self, code: str, client_id: str, data: dict[str, Any]) -> None:
        with self._db() as db:
            db.execute("DELETE FROM codes WHERE expires_at < ?", (time.time(),))
            db.execute(
                "INSERT INTO codes (hash, client_id, data, expires_at) VALUES (?, ?, ?, ?)",
                (digest(code), client_id, json.dumps(data), data["expires_at"]),
            )

    def code(self, code: str, client_id: str) -> tuple[dict[str, Any], str | None] | None:
        """The code's data, and the family of the tokens it bought (None: not used yet)."""
        with self._db() as db:
            row = db.execute(
                "SELECT data, family FROM codes WHERE hash = ? AND client_id = ?", (digest(code), client_id)
            ).fetchone()
        return (json.loads(row[0]), row[1]) if row else None

    def take_code(self, code: str, family: str, keep_until: float) -> bool:
        """Mark the code used by `family`, kept as a marker until `keep_until`; False when
        it was already used (a code works once)."""
        with self._db() as db:
            return (
                db.execute(
                    "UPDATE codes SET family = ?, expires_at = ? WHERE hash = ? AND family IS NULL",
                    (family, keep_until, digest(code)),
                ).rowcount
                > 0
            )

    # -- tokens --------------------------------------------------------------------------

    def add_token(self, token: str, row: TokenRow) -> None:
        with self._db() as db:
            db.execute(
                "INSERT INTO tokens (hash, kind, client_id, grant_id, scopes, resource, expires_at, family) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    digest(token),
                    row.kind,
                    row.client_id,
                    row.grant_id,
                    " ".join(row.scopes),
                    row.resource,
                    row.expires_at,
                    row.family or row.grant_id,
                ),
            )

    def token(self, token: str, kind: str, *, rotated: bool = False) -> TokenRow | None:
        """A live token of this kind whose client is still registered (with `rotated`: a
        refresh token rotated away, kept as a marker)."""
        with self._db() as db:
            row = db.execute(
                "SELECT t.kind, t.client_id, t.grant_id, t.scopes, t.resource, t.expires_at, t.family FROM tokens t "
                "JOIN clients c ON c.client_id = t.client_id WHERE t.hash = ? AND t.kind = ? AND t.expires_at >= ? "
                f"AND t.rotated IS {'NOT ' if rotated else ''}NULL",
                (digest(token), kind, time.time()),
            ).fetchone()
        return TokenRow(row[0], row[1], row[2], row[3].split(), row[4], row[5], row[6]) if row else None

    def rotate(self, grant_id: str) -> bool:
        """End the pair `grant_id`, its refresh token kept as a rotated marker; False when
        it was already rotated or ended."""
        with self._db() as db:
            db.execute("DELETE FROM tokens WHERE expires_at < ?", (time.time(),))
            marked = db.execute(
                "UPDATE tokens SET rotated = ? WHERE grant_id = ? AND kind = 'refresh' AND rotated IS NULL",
                (time.time(), grant_id),
            ).rowcount
            db.execute("DELETE FROM tokens WHERE grant_id = ? AND kind = 'access'", (grant_id,))
        return marked > 0

    def end_grant(self, grant_id: str) -> int:
        """Delete the access and refresh tokens of one pair; how many were live."""
        with self._db() as db:
            db.execute("DELETE FROM tokens WHERE expires_at < ?", (time.time(),))
            return db.execute("DELETE FROM tokens WHERE grant_id = ? AND rotated IS NULL", (grant_id,)).rowcount

    def end_family(self, family: str) -> int:
        """Delete every token of one family, markers too; how many were live."""
        with self._db() as db:
            live = db.execute("SELECT COUNT(*) FROM tokens WHERE family = ? AND rotated IS NULL", (family,))
            count = int(live.fetchone()[0])
            db.execute("DELETE FROM tokens WHERE family = ?", (family,))
        return count

    # -- strikes of wrong passphrases (gate/lockout.py) --------------------------------

    def strikes(self, keys: list[str]) -> dict[str, tuple[int, float | None, int]]:
        """(count, locked until, trips) of each key that has a record."""
        marks = ",".join("?" * len(keys))
        with self._db() as db:
            rows = db.execute(f"SELECT key, count, until, trips FROM strikes WHERE key IN ({marks})", keys)  # noqa: S608
            return {r[0]: (r[1], r[2], r[3]) for r in rows.fetchall()}

    def put_strikes(self, records: dict[str, tuple[int, float | None, int]], now: float, forget_before: float) -> None:
        """Write the records; forget those untouched since `forget_before` that lock nothing."""
        with self._db() as db:
            db.execute("DELETE FROM strikes WHERE updated < ? AND (until IS NULL OR until < ?)", (forget_before, now))
            db.executemany(
                "INSERT OR REPLACE INTO strikes VALUES (?, ?, ?, ?, ?)",
                [(key, count, until, trips, now) for key, (count, until, trips) in records.items()],
            )

    def clear_strikes(self, keys: list[str]) -> None:
        with self._db() as db:
            db.executemany("DELETE FROM strikes WHERE key = ?", [(k,) for k in keys])
