"""End to end (issue #44): the owner's Allow reaches ChatGPT in a real browser. The MCP
SDK's own OAuth client registers itself (RFC 7591) with a redirect URI on another origin, as
ChatGPT does (`https://chatgpt.test:PORT/connector_platform_oauth_redirect`, a small TLS
server on loopback that records the code it is sent); Debian's headless Chromium opens the
authorization request (PKCE S256) through the HTTPS public URL of the loopback tunnel,
where the owner types the passphrase and clicks Allow; the browser must land on the
client's redirect URI with the code and the state, the code must buy a token, and a tool
call must work. Both names resolve to 127.0.0.1 inside Chromium (--host-resolver-rules)
and their certificates come from the tunnel's test CA, which Chromium trusts."""

from __future__ import annotations

import contextlib
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("trustme")
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.auth import AuthorizationCodeResult  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from tests.e2e.chromium import chromium, trusting, until  # noqa: E402
from tests.e2e.cmd_mcp.serverutil import PASSPHRASE, McpServer, Memory, oauth  # noqa: E402
from tests.e2e.cmd_mcp.test_mcp import call  # noqa: E402
from tests.e2e.cmd_mcp.test_oauth import events  # noqa: E402
from tests.e2e.cmd_mcp.tunnel import NAME, Tunnel  # noqa: E402

pytestmark = pytest.mark.daemon

CLIENT_NAME = "chatgpt.test"
CALLBACK_PATH = "/connector_platform_oauth_redirect"


class Callback:
    """The client's redirect endpoint on another origin (chatgpt.com's, on loopback): an
    HTTPS server that records the query of every request it gets and answers with a page."""

    def __init__(self, tunnel: Tunnel):
        self.cert = tunnel.ca.issue_cert(CLIENT_NAME)
        self.hits: list[dict[str, str]] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path == CALLBACK_PATH:
                    hits.append({k: v[0] for k, v in parse_qs(parts.query).items()})
                body = b"<!doctype html><title>connected</title><h1>Connected to ChatGPT</h1>"
                self.send_response(200 if parts.path == CALLBACK_PATH else 404)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # the test asserts on hits, not on a log
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.cert.configure_cert(context)
        # The handshake runs in the request's thread, so a browser's idle preconnect cannot
        # hold up the accepting one.
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
        self.url = f"https://{CLIENT_NAME}:{self.server.server_address[1]}{CALLBACK_PATH}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Callback:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


class Owner:
    """The owner at Chromium: opens the authorization URL the client hands over, types a wrong
    passphrase and then the right one, clicks Allow, and waits for the browser to leave for
    the client's redirect URI; then hands the client the code its endpoint received."""

    def __init__(self, driver: Any, endpoint: Callback, shots: Path):
        self.driver = driver
        self.endpoint = endpoint
        self.shots = shots
        self.authorize_url = ""
        self.landed = ""

    async def redirect(self, url: str) -> None:
        self.authorize_url = url
        await anyio.to_thread.run_sync(self._allow, url)

    async def callback(self) -> AuthorizationCodeResult:
        assert len(self.endpoint.hits) == 1, self.endpoint.hits
        hit = self.endpoint.hits[0]
        return AuthorizationCodeResult(code=hit["code"], state=hit.get("state"))

    def _allow(self, url: str) -> None:
        self._open(url)
        self._answer("not the passphrase", "allow")
        until(self.driver, lambda d: "Wrong passphrase" in d.page_source, "the form again, with the wrong passphrase")
        self._answer(PASSPHRASE, "allow")
        self.landed = self._back("the client's redirect URI with a code")

    def deny(self, url: str) -> str:
        self._open(url)
        self._answer("", "deny")
        return self._back("the client's redirect URI with access_denied")

    def _open(self, url: str) -> None:
        self.driver.get(url)
        until(self.driver, lambda d: d.find_elements(By.NAME, "passphrase"), "the consent page")
        assert self.driver.current_url.startswith(f"https://{NAME}:"), self.driver.current_url
        self.driver.save_screenshot(str(self.shots / f"{len(list(self.shots.iterdir())):02d}-consent.png"))

    def _answer(self, passphrase: str, decision: str) -> None:
        self.driver.find_element(By.NAME, "passphrase").send_keys(passphrase)
        self.driver.find_element(By.CSS_SELECTOR, f'button[value="{decision}"]').click()

    def _back(self, what: str) -> str:
        until(self.driver, lambda d: d.current_url.startswith(self.endpoint.url + "?"), what)
        self.driver.save_screenshot(str(self.shots / f"{len(list(self.shots.iterdir())):02d}-back.png"))
        return self.driver.current_url


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def test_chromium_allows_and_lands_on_the_clients_redirect_uri_on_another_origin(engine, tmp_path):
    bare, url, ws, d = engine
    shots = tmp_path / "screenshots"
    shots.mkdir()
    server = McpServer(tmp_path, url)
    with Tunnel(server.port) as tunnel, Callback(tunnel) as callback:
        server.public_port = tunnel.port
        server.start()
        trust = trusting(
            tunnel.ca.cert_pem.bytes(),
            [tunnel.cert.cert_chain_pems[0].bytes(), callback.cert.cert_chain_pems[0].bytes()],
            Path.home(),
        )
        resolve = f"--host-resolver-rules=MAP {NAME} 127.0.0.1, MAP {CLIENT_NAME} 127.0.0.1"
        driver = chromium(tmp_path / "chromium-profile", resolve, *trust)
        try:
            storage, owner = Memory(), Owner(driver, callback, shots)
            provider = oauth(tunnel, owner, storage, "ChatGPT", redirect_uri=callback.url)

            async def main() -> dict[str, Any]:
                http = tunnel.client(auth=provider)
                async with Client(streamable_http_client(f"{tunnel.url}/mcp", http_client=http)) as client:
                    return await call(client, "get_status")

            status = anyio.run(main)
            # Deny, too, goes back to the client (it was blocked the same way).
            info = storage.client_info
            ask = {
                "response_type": "code",
                "client_id": info.client_id,
                "redirect_uri": callback.url,
                "code_challenge": "x" * 43,
                "code_challenge_method": "S256",
                "state": "denied-state",
            }
            denied = owner.deny(f"{tunnel.url}/authorize?{urlencode(ask)}")
        finally:
            with contextlib.suppress(Exception):
                driver.quit()
            server.stop()

    # The authorization request carried PKCE S256 and a state...
    asked = query_of(owner.authorize_url)
    assert asked["code_challenge_method"] == "S256" and asked["redirect_uri"] == callback.url and asked["state"]
    # ...the browser landed on the client's redirect URI with a code and that state...
    landed, got = urlsplit(owner.landed), query_of(owner.landed)
    assert f"{landed.scheme}://{landed.netloc}{landed.path}" == callback.url
    assert got["state"] == asked["state"] and len(got["code"]) > 30 and callback.hits[0] == got
    # ...the code bought a token with both scopes, and the tool call went through with it.
    assert storage.tokens is not None and set(storage.tokens.scope.split()) == {"mp:read", "mp:write"}
    assert status["state"]["status"] == "ONLINE"
    assert query_of(denied) == callback.hits[1] and callback.hits[1]["error"] == "access_denied"
    assert callback.hits[1]["state"] == "denied-state" and len(callback.hits) == 2
    consents = [(e["outcome"], e["client_id"]) for e in events(server, "mcp_consent")]
    assert consents == [(o, info.client_id) for o in ("wrong passphrase", "allowed", "denied")]
    wrong = [e for e in events(server, "mcp_refused") if e["path"] == "/consent"]
    assert [e["reason"] for e in wrong] == [f"wrong passphrase for client {info.client_id} ('ChatGPT')"]
