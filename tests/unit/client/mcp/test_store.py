"""The OAuth store: a 0600 file, tokens kept as hashes, grants that end together, families
that end whole, used codes and rotated refresh tokens kept as markers, clients that take
their tokens with them, clients no one allowed forgotten, a bounded number of waiting
consent requests, the strikes of wrong passphrases, and a store from before issue #46."""

from __future__ import annotations

import sqlite3
import time

from mp_engine.client.mcp.store import Store, TokenRow, default_path


def client(store: Store, client_id: str = "c1") -> None:
    store.add_client({"client_id": client_id, "client_name": "A client", "redirect_uris": ["http://127.0.0.1/cb"]})


def test_the_file_is_private_and_tokens_are_stored_as_hashes(tmp_path):
    store = Store(tmp_path / "state" / "mcp.sqlite3")
    assert oct(store.path.stat().st_mode & 0o777) == "0o600"
    assert oct(store.path.parent.stat().st_mode & 0o777) == "0o700"
    client(store)
    store.add_token("the-access-token", TokenRow("access", "c1", "g1", ["mp:read"], None, 4e9))
    raw = sqlite3.connect(store.path).execute("SELECT hash, scopes FROM tokens").fetchall()
    assert raw[0][0] != "the-access-token" and len(raw[0][0]) == 64 and raw[0][1] == "mp:read"
    assert store.token("the-access-token", "access").scopes == ["mp:read"]
    assert store.token("the-access-token", "refresh") is None  # kinds do not mix


def test_a_grant_ends_whole_and_expired_tokens_are_not_found(tmp_path):
    store = Store(tmp_path / "s.db")
    client(store)
    store.add_token("a", TokenRow("access", "c1", "g1", ["mp:read"], None, 4e9))
    store.add_token("r", TokenRow("refresh", "c1", "g1", ["mp:read"], None, 4e9))
    store.add_token("old", TokenRow("access", "c1", "g2", ["mp:read"], None, 1.0))
    assert store.token("old", "access") is None
    assert store.end_grant("g1") == 2
    assert store.token("a", "access") is None and store.token("r", "refresh") is None
    assert store.end_grant("g1") == 0


def test_revoking_a_client_takes_its_tokens_and_codes(tmp_path):
    store = Store(tmp_path / "s.db")
    client(store, "c1")
    client(store, "c2")
    store.add_token("a1", TokenRow("access", "c1", "g1", [], None, 4e9))
    store.add_token("a2", TokenRow("access", "c2", "g2", [], None, 4e9))
    store.add_code("code", "c1", {"expires_at": 4e9})
    assert store.revoke_client("c1") is True
    assert store.client("c1") is None and store.token("a1", "access") is None and store.code("code", "c1") is None
    assert store.token("a2", "access") is not None
    assert store.revoke_client("c1") is False
    assert [c["client_id"] for c in Store(store.path).clients()] == ["c2"]  # another handle sees it


def test_a_code_works_once_and_stays_as_a_marker_of_the_family_it_bought(tmp_path):
    store = Store(tmp_path / "s.db")
    store.add_code("code", "c1", {"expires_at": 4e9, "scopes": ["mp:read"]})
    assert store.code("code", "c2") is None  # another client's code
    assert store.code("code", "c1") == ({"expires_at": 4e9, "scopes": ["mp:read"]}, None)
    assert store.take_code("code", "fam1", 4e9) is True and store.take_code("code", "fam2", 4e9) is False
    assert store.code("code", "c1")[1] == "fam1"


def test_rotation_keeps_a_marker_and_a_family_ends_whole(tmp_path):
    store = Store(tmp_path / "s.db")
    client(store)
    store.add_token("a1", TokenRow("access", "c1", "g1", ["mp:read"], None, 4e9, "fam"))
    store.add_token("r1", TokenRow("refresh", "c1", "g1", ["mp:read"], None, 4e9, "fam"))
    assert store.rotate("g1") is True and store.rotate("g1") is False
    assert store.token("a1", "access") is None and store.token("r1", "refresh") is None
    assert store.token("r1", "refresh", rotated=True).family == "fam"
    store.add_token("a2", TokenRow("access", "c1", "g2", ["mp:read"], None, 4e9, "fam"))
    store.add_token("r2", TokenRow("refresh", "c1", "g2", ["mp:read"], None, 4e9, "fam"))
    store.add_token("other", TokenRow("access", "c1", "g3", ["mp:read"], None, 4e9, "fam2"))
    assert store.end_family("fam") == 2
    assert store.token("a2", "access") is None and store.token("r1", "refresh", rotated=True) is None
    assert store.token("other", "access") is not None


def test_clients_no_one_allowed_are_forgotten_and_registrations_are_counted(tmp_path):
    store = Store(tmp_path / "s.db")
    store.add_client({"client_id": "junk", "redirect_uris": []}, address="203.0.113.9")
    store.add_client({"client_id": "mine", "redirect_uris": []})
    store.add_client({"client_id": "by-hand", "redirect_uris": []}, consented=True)
    store.consent("mine")
    assert store.consented("mine") and store.consented("by-hand") and not store.consented("junk")
    assert [a for _, a in store.registered(0)] == ["203.0.113.9", None, None] and store.count_clients() == 3
    assert store.forget_unconsented(time.time() - 3600) == 0  # too young
    assert store.forget_unconsented(time.time() + 1) == 1
    assert store.client("junk") is None and store.client("mine") and store.count_clients() == 2


def test_a_client_keeps_at_most_its_share_of_waiting_consent_requests(tmp_path):
    store = Store(tmp_path / "s.db")
    for n in range(5):
        store.add_pending(f"req{n}", "c1", {"scopes": []}, "csrf", 600, keep=3)
    store.add_pending("other", "c2", {"scopes": []}, "csrf", 600, keep=3)
    assert [p.id for p in store.pendings() if p.client_id == "c1"] == ["req2", "req3", "req4"]
    assert store.pending("req4").approved is None and store.pending("req") is None  # an id, not a prefix
    assert [p.id for p in store.pendings("req")] == ["req2", "req3", "req4"]
    store.approve_pending("req4", ["mp:read"])
    assert store.pending("req4").approved == ["mp:read"]


def test_strikes_are_kept_cleared_and_forgotten_when_they_lock_nothing(tmp_path):
    store = Store(tmp_path / "s.db")
    store.put_strikes({"client:c1": (3, None, 0), "server": (20, 1060.0, 1)}, 1000.0, 0.0)
    assert store.strikes(["client:c1", "server", "address:x"]) == {"client:c1": (3, None, 0), "server": (20, 1060.0, 1)}
    store.put_strikes({"request:r": (1, None, 0)}, 2000.0, forget_before=1500.0)  # the others: old, locking nothing
    assert set(store.strikes(["client:c1", "server", "request:r"])) == {"request:r"}
    store.clear_strikes(["request:r"])
    assert store.strikes(["request:r"]) == {}


def test_a_store_from_before_issue_46_is_brought_forward(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE clients (client_id TEXT PRIMARY KEY, info TEXT NOT NULL, created REAL NOT NULL, last_used REAL);
        CREATE TABLE codes (hash TEXT PRIMARY KEY, client_id TEXT NOT NULL, data TEXT NOT NULL, expires_at REAL NOT NULL);
        CREATE TABLE tokens (hash TEXT PRIMARY KEY, kind TEXT NOT NULL, client_id TEXT NOT NULL, grant_id TEXT NOT NULL,
            scopes TEXT NOT NULL, resource TEXT, expires_at REAL NOT NULL);
        CREATE TABLE pending (id TEXT PRIMARY KEY, client_id TEXT NOT NULL, data TEXT NOT NULL, csrf TEXT NOT NULL,
            expires_at REAL NOT NULL);
        CREATE TABLE failures (address TEXT PRIMARY KEY, count INTEGER NOT NULL, locked_until REAL);
        INSERT INTO clients VALUES ('used', '{"client_id": "used"}', 1.0, 5.0);
        INSERT INTO clients VALUES ('junk', '{"client_id": "junk"}', 1.0, NULL);
        """
    )
    db.commit()
    db.close()
    store = Store(path)
    assert store.consented("used") and not store.consented("junk")  # junk expires like a new one
    store.add_token("t", TokenRow("access", "used", "g1", [], None, 4e9))
    assert store.token("t", "access").family == "g1"
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "failures" not in tables and "strikes" in tables


def test_the_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("MP_ENGINE_MCP_STORE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_path() == tmp_path / "mp-engine" / "mcp.sqlite3"
    monkeypatch.setenv("MP_ENGINE_MCP_STORE", str(tmp_path / "x.db"))
    assert default_path() == tmp_path / "x.db"
