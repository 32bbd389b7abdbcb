"""The authorization server's state transitions: a parked request, a code that works once,
refresh rotation, revocation of a pair, a family ended by a reused code or refresh token
(issue #46), registration's bounds, and the static token beside OAuth."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp.server.auth.provider import AuthorizationParams, RegistrationError, TokenError
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
    pending = p.store.pending(url.rsplit("=", 1)[1])
    assert pending.client_id == "c1" and pending.params["scopes"] == SCOPES and pending.params["state"] == "s"
    assert len(pending.csrf) > 20


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
    assert run(p.load_access_token, new.access_token).client_id == "c1"
    revoked = run(p.load_access_token, new.access_token)
    run(p.revoke_token, revoked)
    assert run(p.load_refresh_token, CLIENT, new.refresh_token) is None  # revoking one ends both


def family(p: Provider):
    """A consent's first pair, then its second (a refresh): the family, at work."""
    run(p.register_client, CLIENT.model_copy())
    params = {
        "code_challenge": "x" * 43,
        "redirect_uri": "https://chatgpt.com/cb",
        "redirect_uri_provided_explicitly": True,
    }
    code = p.grant("c1", params, ["mp:read"])
    first = run(p.exchange_authorization_code, CLIENT, run(p.load_authorization_code, CLIENT, code))
    second = run(p.exchange_refresh_token, CLIENT, run(p.load_refresh_token, CLIENT, first.refresh_token), ["mp:read"])
    return code, first, second


def test_a_rotated_refresh_token_used_again_ends_the_whole_family(tmp_path, capsys):
    from mp_engine.record import logs

    logs.configure("info")
    p = provider(tmp_path)
    _, first, second = family(p)
    stale = run(p.load_refresh_token, CLIENT, first.refresh_token)
    assert stale.rotated  # kept as a marker: its reuse is seen
    with pytest.raises(TokenError):
        run(p.exchange_refresh_token, CLIENT, stale, ["mp:read"])
    assert run(p.load_access_token, second.access_token) is None  # the tokens issued after it end too
    assert run(p.load_refresh_token, CLIENT, second.refresh_token) is None
    refused = [json.loads(line) for line in capsys.readouterr().err.splitlines() if '"mcp_refused"' in line]
    assert len(refused) == 1 and refused[0]["client_id"] == "c1"
    assert refused[0]["reason"].startswith("a refresh token was used after its rotation, for client c1 ('ChatGPT')")


def test_a_code_used_a_second_time_ends_what_it_bought(tmp_path):
    p = provider(tmp_path)
    code, _, second = family(p)
    assert run(p.load_authorization_code, CLIENT, code) is None  # the SDK answers invalid_grant
    assert run(p.load_access_token, second.access_token) is None


def test_revoking_a_rotated_refresh_token_ends_nothing_more(tmp_path):
    """Only /token is a reuse: /revoke with a dead token is a no-op (RFC 7009 §2.2)."""
    p = provider(tmp_path)
    _, first, second = family(p)
    run(p.revoke_token, run(p.load_refresh_token, CLIENT, first.refresh_token))
    assert run(p.load_access_token, second.access_token) is not None


def test_registration_keeps_to_its_bounds(tmp_path):
    p = provider(tmp_path)
    for bad, says in (
        ({"client_name": "n" * 101}, "client_name has 101 characters"),
        ({"redirect_uris": ["http://evil.example/cb"]}, "not an https URL"),
        ({"redirect_uris": [f"https://x.example/{n}" for n in range(6)]}, "give 1 to 5 redirect_uris"),
    ):
        with pytest.raises(RegistrationError) as e:
            run(p.register_client, OAuthClientInformationFull.model_validate({**CLIENT.model_dump(), **bad}))
        assert says in e.value.error_description
    assert p.store.clients() == []


def test_the_static_token_has_every_scope_and_nothing_else_passes(tmp_path):
    p = provider(tmp_path)
    static = run(p.load_access_token, "static-0123456789")
    assert static.client_id == STATIC_CLIENT and static.scopes == SCOPES
    assert run(p.load_access_token, "static-012345678") is None
    assert run(p.load_access_token, "") is None
