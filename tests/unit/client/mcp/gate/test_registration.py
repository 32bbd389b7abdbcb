"""Registration's rules: which redirect URIs may be registered, the metadata's bounds, and
when a registration must wait (per hour, per address, the store's cap)."""

from __future__ import annotations

import pytest

from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.client.mcp.gate.registration import admission, metadata_problem, redirect_uri_problem

LIMITS = Limits()


@pytest.mark.parametrize(
    "uri",
    [
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "https://claude.ai/api/mcp/auth_callback",
        "http://127.0.0.1:33418/callback",
        "http://localhost:5173/cb",
        "http://[::1]:8080/cb",
    ],
)
def test_https_and_loopback_http_may_be_registered(uri):
    assert redirect_uri_problem(uri) is None


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "http://evil.example/cb",
        "http://10.0.0.1/cb",
        "https://evil.example/cb#frag",
        "https://u:p@evil.example/",
        "cursor://anysphere.cursor-retrieval/oauth/callback",
        "https:///nohost",
    ],
)
def test_anything_else_is_refused(uri):
    assert redirect_uri_problem(uri) is not None


def test_a_native_apps_own_scheme_only_by_hand_and_never_a_browsers():
    assert redirect_uri_problem("cursor://anysphere.cursor-retrieval/oauth/callback", private_use=True) is None
    for uri in ("javascript:alert(1)", "data:text/html,x", "file:///x", "http://evil.example/"):
        assert redirect_uri_problem(uri, private_use=True) is not None


def test_the_metadata_is_bounded():
    ok = {"client_name": "ChatGPT", "redirect_uris": ["https://chatgpt.com/cb"]}
    assert metadata_problem(ok, LIMITS) is None
    assert metadata_problem({**ok, "client_name": "x" * 3_900_000}, LIMITS)[0] == "invalid_client_metadata"
    many = {**ok, "redirect_uris": [f"https://chatgpt.com/{n}" for n in range(20_000)]}
    assert "give 1 to 5" in metadata_problem(many, LIMITS)[1]
    long = {**ok, "redirect_uris": ["https://chatgpt.com/" + "a" * 2000]}
    assert metadata_problem(long, LIMITS)[0] == "invalid_redirect_uri"


def test_registrations_wait_per_address_then_per_server_and_the_store_has_a_cap():
    now = 10_000.0
    mine = [(now - 100 - n, "198.51.100.7") for n in range(LIMITS.registrations_per_address_per_hour)]
    why, wait = admission(mine, 5, "198.51.100.7", now, LIMITS)
    assert "from this address" in why and wait == pytest.approx(3600 - 100 - 4)
    assert admission(mine, 5, "203.0.113.1", now, LIMITS) is None  # another address
    assert admission(mine, 5, None, now, LIMITS) is None  # a shared address counts only on the server
    everyone = [(now - 10, None)] * LIMITS.registrations_per_hour
    assert "on this server" in admission(everyone, 25, None, now, LIMITS)[0]
    full = admission([], LIMITS.max_clients, None, now, LIMITS)
    assert "mp-engine mcp revoke" in full[0] and full[1] is None
