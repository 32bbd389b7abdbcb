"""The authorization server's state transitions: a parked request, a code that works once,
refresh rotation, revocation of a pair, and the static token beside OAuth."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.auth.provider import AuthorizationParams, TokenError
from mcp.shared.auth import OAuthClientInformationFull

from mp_engine.client.mcp.provider import SCOPES, STATIC_CLIENT, Provider
from mp_engine.client.mcp.store import Store


def provider(tmp_path) -> Provider:
    return Provider(Store(tmp_path / "s.db"), "https://mp.test/", static_token="static-0123456789", access_ttl=60)


CLIENT = OAuthClientInformationFull(client_id="c1", client_name="ChatGPT", redirect_uris=["https://chatgpt.com/cb"])


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


def test_authorize_parks_the_request_and_sends_the_browser_to_consent(tmp_path):
    p = provider(tmp_path)
    run(p.register_client, CLIENT.model_copy())
    assert run(p.get_client, "c1").scope == " ".join(SCOPES)  # no scope asked: both offered
    params = AuthorizationParams(
        state="s",
        scopes=None,
        code_challenge="x" * 43,
        redirect_uri="https://chatgpt.com/cb",
        redirect_uri_provided_explicitly=True,
    )
    url = run(p.authorize, run(p.get_client, "c1"), params)
    assert url.startswith("https://mp.test/consent?request=")
    client_id, data, csrf = p.store.pending(url.rsplit("=", 1)[1])
    assert client_id == "c1" and data["scopes"] == SCOPES and data["state"] == "s" and len(csrf) > 20


def test_a_code_is_exchanged_once_and_refresh_rotates_the_pair(tmp_path):
    p = provider(tmp_path)
    run(p.register_client, CLIENT.model_copy())
    code = p.grant(
        "c1",
        {
            "code_challenge": "x" * 43,
            "redirect_uri": "https://chatgpt.com/cb",
            "redirect_uri_provided_explicitly": True,
        },
        ["mp:read"],
    )
    loaded = run(p.load_authorization_code, CLIENT, code)
    assert loaded.scopes == ["mp:read"] and loaded.expires_at > 0
    tokens = run(p.exchange_authorization_code, CLIENT, loaded)
    assert tokens.expires_in == 60 and tokens.scope == "mp:read"
    with pytest.raises(TokenError):
        run(p.exchange_authorization_code, CLIENT, loaded)
    access = run(p.load_access_token, tokens.access_token)
    assert access.client_id == "c1" and access.scopes == ["mp:read"]
    refresh = run(p.load_refresh_token, CLIENT, tokens.refresh_token)
    other = CLIENT.model_copy(update={"client_id": "c2"})
    assert run(p.load_refresh_token, other, tokens.refresh_token) is None  # not another client's
    new = run(p.exchange_refresh_token, CLIENT, refresh, ["mp:read"])
    assert run(p.load_access_token, tokens.access_token) is None  # the old pair ended
    assert run(p.load_refresh_token, CLIENT, tokens.refresh_token) is None
    with pytest.raises(TokenError):
        run(p.exchange_refresh_token, CLIENT, refresh, ["mp:read"])
    run(p.revoke_token, run(p.load_access_token, new.access_token))
    assert run(p.load_refresh_token, CLIENT, new.refresh_token) is None  # revoking one ends both


def test_the_static_token_has_every_scope_and_nothing_else_passes(tmp_path):
    p = provider(tmp_path)
    static = run(p.load_access_token, "static-0123456789")
    assert static.client_id == STATIC_CLIENT and static.scopes == SCOPES
    assert run(p.load_access_token, "static-012345678") is None
    assert run(p.load_access_token, "") is None
