"""`mp-engine mcp --http` as a real subprocess for the tests: started with a public URL
behind the loopback tunnel, an owner passphrase and its own store; the MCP SDK's own OAuth
client, with the owner's browser answering the consent page; and the OAuth flow by hand
(register, authorize with PKCE, the consent form, the token endpoint) for the tests that
misuse it (issue #46)."""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import secrets
import socket
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.conftest import wait_for
from tests.e2e.cli import MP_ENGINE
from tests.e2e.cmd_mcp.tunnel import Tunnel

PASSPHRASE = "correct horse battery staple"
TOKEN = "static-token-for-scripts-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class McpServer:
    """One `mp-engine mcp --http` process; `restart()` keeps its store."""

    def __init__(self, tmp_path: Path, repo: str, tunnel_port: int | None = None, *extra: str):
        self.tmp_path = tmp_path
        self.repo = repo
        self.port = free_port()
        self.store = tmp_path / "mcp-state" / "mcp.sqlite3"
        self.log_path = tmp_path / "mcp.log"
        self.public_port = tunnel_port
        self.extra = extra
        self.more_env: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "XDG_CACHE_HOME": str(self.tmp_path / "orchestrator-cache"),
            "MP_ENGINE_MCP_PASSPHRASE": PASSPHRASE,
            "MP_ENGINE_MCP_STORE": str(self.store),
            "MP_ENGINE_MCP_TOKEN": TOKEN,  # not --token: that shows in `ps`
            **self.more_env,
        }

    def start(self) -> McpServer:
        args = [MP_ENGINE, "mcp", "--repo", self.repo, "--http", f"127.0.0.1:{self.port}"]
        if self.public_port is not None:
            args += ["--public-url", f"https://mp.test:{self.public_port}"]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen([*args, *self.extra], env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        log.close()

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(listening, timeout=60, what="the MCP server to listen")
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [MP_ENGINE, "mcp", *args], env=self.env(), capture_output=True, text=True, timeout=60, check=False
        )

    def log(self) -> str:
        return self.log_path.read_text()


class Memory(TokenStorage):
    """The client's token storage, kept in memory (a real client keeps it on disk)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None
        self.set_at = 0.0  # time.monotonic() when the tokens were last stored

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens, self.set_at = tokens, time.monotonic()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """The owner's browser, as an HTTP client: follows /authorize to the consent page, reads
    it, posts the form (GET the page, POST the form with the passphrase) and reads where the
    answer sends it back. (Chromium itself: test_consent_browser.py.)"""

    def __init__(self, tunnel: Tunnel, passphrase: str = PASSPHRASE, write: bool = True):
        self.tunnel = tunnel
        self.passphrase = passphrase
        self.write = write
        self.pages: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        async with self.tunnel.client() as c:
            go = await c.get(url)
            assert go.status_code == 302, go.text
            consent = go.headers["location"]
            assert consent.startswith(self.tunnel.url + "/consent?request="), consent
            page = await c.get(consent)
            assert page.status_code == 200, page.text
            self.pages.append(page.text)
            back = await c.post(
                f"{self.tunnel.url}/consent",
                data={**form_of(page.text), **self.answers()},
                headers={"Cookie": cookie_of(page)},
            )
            query = parse_qs(urlsplit(onward(back)).query)
            self.result = AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0])

    def answers(self) -> dict[str, str]:
        return {"passphrase": self.passphrase, "decision": "allow", **({"scope_write": "1"} if self.write else {})}

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def onward(answer: Any) -> str:
    """Where the consent form's answer sends the browser: its page's meta refresh, which its
    link repeats (consent.py's `_onward`)."""
    assert answer.status_code == 200, answer.text
    refresh = re.search(r'<meta http-equiv="refresh" content="0; url=([^"]+)">', answer.text)
    link = re.search(r'<a href="([^"]+)">', answer.text)
    assert refresh and link and refresh.group(1) == link.group(1), answer.text
    return html.unescape(refresh.group(1))


def form_of(page: str) -> dict[str, str]:
    return dict(re.findall(r'name="(request|csrf)" value="([^"]+)"', page))


def cookie_of(response: Any) -> str:
    return response.headers["set-cookie"].split(";", 1)[0]


def oauth(
    tunnel: Tunnel, browser: Any, storage: Memory, name: str, redirect_uri: str = "http://127.0.0.1:33418/callback"
) -> OAuthClientProvider:
    """The MCP SDK's own OAuth client for the server behind the tunnel; `browser` answers the
    consent page (`redirect(url)`) and hands the code back (`callback()`)."""
    metadata = OAuthClientMetadata(
        client_name=name,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(
        f"{tunnel.url}/mcp", metadata, storage, redirect_handler=browser.redirect, callback_handler=browser.callback
    )


# -- the flow by hand ----------------------------------------------------------------------

CALLBACK = "http://127.0.0.1:33418/callback"  # never contacted: the code is read from the page


def pkce() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(48)
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


def register(http: Any, base: str, name: str, redirect_uri: str = CALLBACK, **more: Any) -> Any:
    metadata = {
        "client_name": name,
        "redirect_uris": [redirect_uri],
        "response_types": ["code"],
        "grant_types": ["authorization_code", "refresh_token"],
        **more,
    }
    return http.post(f"{base}/register", json=metadata)


def authorize_url(base: str, client_id: str, challenge: str, redirect_uri: str = CALLBACK, **more: str) -> str:
    ask = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st",
        **more,
    }
    return f"{base}/authorize?{urlencode(ask)}"


def sign_in(http: Any, base: str, url: str, passphrase: str = PASSPHRASE, **headers: str) -> Any:
    """Open an authorization URL and answer its consent page: the form's answer, or the first
    answer that was not the next step (a lockout page, an error)."""
    go = http.get(url, headers=headers)
    if go.status_code != 302:
        return go
    page = http.get(go.headers["location"], headers=headers)
    if page.status_code != 200:
        return page
    http.cookies.clear()
    answers = {**form_of(page.text), "passphrase": passphrase, "decision": "allow", "scope_write": "1"}
    return http.post(f"{base}/consent", data=answers, headers={"Cookie": cookie_of(page), **headers})


def code_of(answer: Any) -> str:
    return parse_qs(urlsplit(onward(answer)).query)["code"][0]


def token(http: Any, base: str, client: dict[str, Any], **grant: str) -> Any:
    """POST /token with the client's credentials: `code=..., code_verifier=...` or `refresh_token=...`."""
    kind = "refresh_token" if "refresh_token" in grant else "authorization_code"
    extra = {"redirect_uri": client["redirect_uris"][0]} if kind == "authorization_code" else {}
    return http.post(
        f"{base}/token",
        data={
            "grant_type": kind,
            "client_id": client["client_id"],
            "client_secret": client["client_secret"],
            **extra,
            **grant,
        },
    )
