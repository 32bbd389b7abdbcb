"""End to end (issue #46, items 2 and 3): dynamic client registration against the real
`mp-engine mcp` behind the loopback TLS tunnel, within bounds (the metadata, the rate, the
store's cap, clients no one allowed forgotten); redirect URIs of a safe kind only; and
/authorize's early errors answered with a page, never a redirect."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mcp")
pytest.importorskip("trustme")

from tests.conftest import wait_for  # noqa: E402
from tests.e2e.cmd_mcp.serverutil import McpServer, authorize_url, pkce, register  # noqa: E402
from tests.e2e.cmd_mcp.test_oauth import events  # noqa: E402
from tests.e2e.cmd_mcp.tunnel import Tunnel  # noqa: E402

pytestmark = pytest.mark.daemon


def serve(tmp_path, url, tunnel: Tunnel, limits: str = "") -> McpServer:
    """The server behind `tunnel`, its limits by environment (a server from before issue
    #46 starts with them too)."""
    server = McpServer(tmp_path, url, tunnel.port)
    server.more_env = {"MP_ENGINE_MCP_LIMITS": limits} if limits else {}
    tunnel.backend_port = server.port
    return server.start()


def test_registration_is_bounded_rate_limited_and_forgets_clients_no_one_allowed(engine, tmp_path):
    bare, url, ws, d = engine
    with Tunnel(0) as tunnel:
        server = serve(tmp_path, url, tunnel, "registrations_per_hour=3 unconsented_client_s=2")
        try:
            with tunnel.sync_client() as http:
                base = tunnel.url
                # Before issue #46 each of these was stored, forever.
                huge = register(http, base, "n" * 3_900_000)
                assert huge.status_code == 413 and huge.json()["error"] == "invalid_client_metadata"
                many = register(http, base, "many", redirect_uris=[f"https://x.example/{n}" for n in range(20_000)])
                assert many.status_code == 413
                long_name = register(http, base, "n" * 101)
                assert long_name.status_code == 400 and "at most 100" in long_name.json()["error_description"]
                six = register(http, base, "six", redirect_uris=[f"https://x.example/{n}" for n in range(6)])
                assert six.status_code == 400 and six.json()["error"] == "invalid_redirect_uri"
                made = [register(http, base, f"client {n}") for n in range(3)]
                assert [r.status_code for r in made] == [201] * 3
                fourth = register(http, base, "one too many")
                assert fourth.status_code == 429 and int(fourth.headers["retry-after"]) > 1
                assert "mp-engine mcp clients add" in fourth.json()["error_description"]
                listed = server.cli("clients")
                assert listed.stdout.count("never allowed: forgotten at") == 3, listed.stdout
                # No one allowed them: they are forgotten, and the hour's count with them.
                first = made[0].json()["client_id"]

                def forgotten() -> bool:
                    page = http.get(authorize_url(base, first, pkce()[1]))
                    return page.status_code == 400 and "is registered here" in page.text

                wait_for(forgotten, timeout=30, interval=0.5, what="the unallowed client to be forgotten")
                assert register(http, base, "after them").status_code == 201
            rows = json.loads(server.cli("clients", "--json").stdout)
            assert [r["client_name"] for r in rows] == ["after them"] and rows[0]["forgotten_at"]
        finally:
            server.stop()
    assert server.store.stat().st_size < 200_000
    refused = [e for e in events(server, "mcp_refused") if e["path"] == "/register"]
    assert [e["status"] for e in refused] == [429] and "registered on this server" in refused[0]["reason"]


def test_a_redirect_uri_that_is_not_https_or_loopback_is_refused_and_authorize_answers_errors_with_a_page(
    engine, tmp_path
):
    bare, url, ws, d = engine
    with Tunnel(0) as tunnel:
        server = serve(tmp_path, url, tunnel)
        try:
            with tunnel.sync_client() as http:
                for uri in (
                    "javascript:alert(document.domain)",
                    "data:text/html,<script>alert(1)</script>",
                    "file:///etc/passwd",
                    "http://evil.example/cb",
                ):
                    got = register(http, tunnel.url, "evil", redirect_uri=uri)
                    assert got.status_code == 400 and got.json()["error"] == "invalid_redirect_uri", (uri, got.text)
                early_errors_are_pages(http, tunnel.url)
        finally:
            server.stop()
    refused = [e for e in events(server, "mcp_refused") if e["path"] == "/authorize"]
    assert len(refused) == 3 and all(e["reason"].startswith("authorization request refused") for e in refused)


def early_errors_are_pages(http, base: str) -> None:
    """https is registrable, and nothing is granted to it without the owner; but the server
    must not send a browser there on an attacker's malformed request (before issue #46: a
    302 to the registered URI, whatever it was, without any consent)."""
    client = register(http, base, "elsewhere", redirect_uri="https://evil.example/cb").json()
    bad_pkce = authorize_url(
        base, client["client_id"], pkce()[1], "https://evil.example/cb", code_challenge_method="plain"
    )
    page = http.get(bad_pkce)
    assert page.status_code == 400 and "location" not in page.headers, page.headers
    assert "malformed" in page.text and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    scope = http.get(authorize_url(base, client["client_id"], pkce()[1], "https://evil.example/cb", scope="mp:admin"))
    assert scope.status_code == 400 and "location" not in scope.headers
    unknown = http.get(authorize_url(base, "nobody", pkce()[1]))
    assert unknown.status_code == 400 and "location" not in unknown.headers
    good = http.get(authorize_url(base, client["client_id"], pkce()[1], "https://evil.example/cb"))
    assert good.status_code == 302 and good.headers["location"].startswith(f"{base}/consent?request=")
