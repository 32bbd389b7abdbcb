"""End to end (issue #46, item 1): the consent page's passphrase lockout against the real
`mp-engine mcp` behind the loopback TLS tunnel, whatever the headers say. The tunnel
appends the address it saw to X-Forwarded-For, as cloudflared and ngrok do; each client of
the tunnel connects from its own loopback address (127.0.0.2, 127.0.0.3)."""

from __future__ import annotations

import re
import socket

import pytest

pytest.importorskip("mcp")
pytest.importorskip("trustme")

from tests.conftest import wait_for  # noqa: E402
from tests.e2e.cmd_mcp.serverutil import (  # noqa: E402
    PASSPHRASE,
    TOKEN,
    McpServer,
    authorize_url,
    code_of,
    cookie_of,
    pkce,
    register,
    sign_in,
    token,
)
from tests.e2e.cmd_mcp.test_oauth import events  # noqa: E402
from tests.e2e.cmd_mcp.tunnel import Tunnel  # noqa: E402

pytestmark = pytest.mark.daemon

GUESSER, OWNER = "127.0.0.2", "127.0.0.3"


def serve(tmp_path, url, tunnel: Tunnel, **env: str) -> McpServer:
    """The server behind `tunnel`; settings by environment (`MP_ENGINE_MCP_LIMITS`,
    `MP_ENGINE_MCP_TRUSTED_PROXY`), which a server from before issue #46 starts with too."""
    server = McpServer(tmp_path, url, tunnel.port)
    server.more_env = env
    tunnel.backend_port = server.port
    return server.start()


def guesses(http, base: str, count: int, *, new_client_every: int = 3) -> list[int]:
    """Wrong passphrases, each on a new consent request, each claiming another address in
    X-Forwarded-For, a new client every few: what a guesser behind the tunnel can vary."""
    statuses, client = [], {}
    for n in range(count):
        if n % new_client_every == 0:
            client = register(http, base, f"guesser {n}").json()
        url = authorize_url(base, client["client_id"], pkce()[1])
        statuses.append(
            sign_in(http, base, url, "not the passphrase", **{"X-Forwarded-For": f"198.51.100.{n}"}).status_code
        )
    return statuses


def test_rotating_headers_requests_and_clients_meets_the_servers_backoff_and_the_owner_approves_on_the_host(
    engine, tmp_path
):
    bare, url, ws, d = engine
    # A tunnel that sends no X-Forwarded-For: the guesser's own header reaches the server
    # as written, as in the probe of issue #46.
    with Tunnel(0, forwards_for=False) as tunnel:
        limits = "backoff_s=3600 backoff_max_s=3600 registrations_per_hour=100"
        server = serve(tmp_path, url, tunnel, MP_ENGINE_MCP_LIMITS=limits)
        try:
            with tunnel.sync_client(GUESSER) as http:
                statuses = guesses(http, tunnel.url, 120)
            # Before issue #46: 120 answers of 401, every one a guess checked. Now the server
            # checks 19, the 20th starts its backoff, and no header or new client or request changes that.
            assert statuses[:19] == [401] * 19 and set(statuses[19:]) == {429}, statuses
            with tunnel.sync_client(OWNER) as http:
                verifier, challenge = pkce()
                mine = register(http, tunnel.url, "the owner's client").json()
                locked = sign_in(http, tunnel.url, authorize_url(tunnel.url, mine["client_id"], challenge))
                assert locked.status_code == 429 and "mp-engine mcp approve-login" in locked.text
                short = re.search(r"approve-login (\S+)</pre>", locked.text).group(1)
                approved = server.cli("approve-login", short)
                assert approved.returncode == 0 and "approved" in approved.stdout, approved.stderr
                # the lockout page looks again (its meta refresh); now it moves on with a code
                again = re.search(r'url=(consent\?request=[^"]+)"', locked.text).group(1)
                moved = http.get(f"{tunnel.url}/{again}", headers={"Cookie": cookie_of(locked)})
                tokens = token(http, tunnel.url, mine, code=code_of(moved), code_verifier=verifier)
                assert tokens.status_code == 200, tokens.text
                status = http.get(
                    f"{tunnel.url}/api/v1/status", headers={"Authorization": f"Bearer {tokens.json()['access_token']}"}
                )
                assert status.status_code == 200
        finally:
            server.stop()
    consents = events(server, "mcp_consent")
    assert [e["outcome"] for e in consents].count("wrong passphrase") == 20  # the 20th started the backoff
    assert consents[-1]["outcome"] == "allowed on the host"
    # No address counted: the tunnel's own is shared, and no trusted proxy vouches for any.
    assert {e["address"] for e in consents} == {"127.0.0.1"}


def test_others_wrong_passphrases_never_keep_the_owner_out_longer_than_the_backoff(engine, tmp_path):
    bare, url, ws, d = engine
    with Tunnel(0, forwards_for=False) as tunnel:  # every client comes from the tunnel's 127.0.0.1
        server = serve(tmp_path, url, tunnel)
        try:
            with tunnel.sync_client(GUESSER) as http:
                # Five wrong tries on one request: before issue #46 they locked 127.0.0.1, the
                # tunnel's address and so everyone's, for 15 minutes.
                guesser = register(http, tunnel.url, "guesser").json()
                one = authorize_url(tunnel.url, guesser["client_id"], pkce()[1])
                go = http.get(one)
                page_url = go.headers["location"]
                tried = []
                for _ in range(6):
                    page = http.get(page_url)
                    form = dict(re.findall(r'name="(request|csrf)" value="([^"]+)"', page.text))
                    http.cookies.clear()
                    answer = {**form, "passphrase": "wrong", "decision": "allow"}
                    tried.append(
                        http.post(f"{tunnel.url}/consent", data=answer, headers={"Cookie": cookie_of(page)}).status_code
                    )
                assert tried[:4] == [401] * 4 and tried[4] == 429  # that request takes no more
            with tunnel.sync_client(OWNER) as http:
                verifier, challenge = pkce()
                mine = register(http, tunnel.url, "the owner's client").json()
                allowed = sign_in(http, tunnel.url, authorize_url(tunnel.url, mine["client_id"], challenge))
                assert allowed.status_code == 200, allowed.text
                code_of(allowed)
            with tunnel.sync_client(GUESSER) as http:
                statuses = guesses(http, tunnel.url, 20)
                assert statuses[-1] == 429
            with tunnel.sync_client(OWNER) as http:
                url_ = authorize_url(tunnel.url, mine["client_id"], challenge)
                waiting = sign_in(http, tunnel.url, url_)
                # the whole server waits, the owner too, but only the backoff: seconds, not 15 minutes
                assert waiting.status_code == 429 and int(waiting.headers["retry-after"]) <= 61
                wait_for(
                    lambda: sign_in(http, tunnel.url, url_).status_code == 200,
                    timeout=90,
                    interval=1,
                    what="the backoff to end for the owner",
                )
        finally:
            server.stop()


def test_a_trusted_proxy_names_the_address_and_nothing_else_does(engine, tmp_path):
    bare, url, ws, d = engine
    with Tunnel(0) as tunnel:
        server = serve(
            tmp_path,
            url,
            tunnel,
            MP_ENGINE_MCP_TRUSTED_PROXY="127.0.0.1",
            MP_ENGINE_MCP_LIMITS="registrations_per_address_per_hour=50",
        )
        try:
            with tunnel.sync_client(GUESSER) as http:
                # the guesser claims the owner's address; the tunnel appends the one it saw
                statuses = guesses(http, tunnel.url, 6, new_client_every=1)
                assert statuses == [401] * 4 + [429, 429], statuses
            with tunnel.sync_client(OWNER) as http:
                mine = register(http, tunnel.url, "the owner's client").json()
                allowed = sign_in(http, tunnel.url, authorize_url(tunnel.url, mine["client_id"], pkce()[1]))
                assert allowed.status_code == 200, allowed.text
            # Straight to the server from 127.0.0.1, the trusted proxy's address: a header
            # entry that is no address is not taken for one.
            with socket.create_connection(("127.0.0.1", server.port)) as s:
                s.sendall(
                    f"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                    "X-Forwarded-For: <script>, evil\r\nConnection: close\r\n\r\n".encode()
                )
                assert b" 401 " in s.recv(1024)
        finally:
            server.stop()
    wrong = [e["address"] for e in events(server, "mcp_consent") if e["outcome"] == "wrong passphrase"]
    assert wrong == [GUESSER] * 5
    refused = events(server, "mcp_refused")
    assert [e["client"] for e in refused if e["path"] == "/api/v1/status"] == ["127.0.0.1"]
    assert any("address locked out" in e["reason"] or "(address locked out)" in e["reason"] for e in refused)
    assert TOKEN not in server.log() and PASSPHRASE not in server.log()
