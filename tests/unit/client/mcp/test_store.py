"""The OAuth store: a 0600 file, tokens kept as hashes, grants that end together, clients
that take their tokens with them, and the passphrase lockout."""

from __future__ import annotations

import sqlite3

from mp_engine.client.mcp.store import LOCKOUT_FAILURES, LOCKOUT_SECONDS, Store, TokenRow, default_path


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


def test_a_code_works_once(tmp_path):
    store = Store(tmp_path / "s.db")
    store.add_code("code", "c1", {"expires_at": 4e9, "scopes": ["mp:read"]})
    assert store.code("code", "c2") is None  # another client's code
    assert store.code("code", "c1")["scopes"] == ["mp:read"]
    assert store.take_code("code") is True and store.take_code("code") is False


def test_five_failures_lock_an_address_for_fifteen_minutes(tmp_path):
    store = Store(tmp_path / "s.db")
    now = 1000.0
    counts = [store.fail("10.0.0.1", now) for _ in range(LOCKOUT_FAILURES)]
    assert counts == [1, 2, 3, 4, 0]
    assert store.locked_until("10.0.0.1", now) == now + LOCKOUT_SECONDS
    assert store.locked_until("10.0.0.2", now) is None  # per address
    assert store.locked_until("10.0.0.1", now + LOCKOUT_SECONDS + 1) is None
    store.fail("10.0.0.2", now)
    store.succeed("10.0.0.2")
    assert store.fail("10.0.0.2", now) == 1  # a right answer starts the count over


def test_the_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("MP_ENGINE_MCP_STORE", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_path() == tmp_path / "mp-engine" / "mcp.sqlite3"
    monkeypatch.setenv("MP_ENGINE_MCP_STORE", str(tmp_path / "x.db"))
    assert default_path() == tmp_path / "x.db"
