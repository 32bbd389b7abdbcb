"""/authorize's front: every error before the client and its redirect URI are known good
is a page, never a redirect; a good request goes on to the SDK's handler."""

from __future__ import annotations

from urllib.parse import urlencode

import anyio
import httpx2
from mcp.shared.auth import OAuthClientInformationFull
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mp_engine.client.mcp.gate.authorize import AuthorizeFront

CLIENTS = {
    "evil": OAuthClientInformationFull(client_id="evil", redirect_uris=["http://evil.example/cb"], scope="mp:read"),
    "good": OAuthClientInformationFull(client_id="good", redirect_uris=["https://chatgpt.com/cb"], scope="mp:read"),
}
GOOD = {
    "response_type": "code",
    "client_id": "good",
    "redirect_uri": "https://chatgpt.com/cb",
    "code_challenge": "x" * 43,
    "code_challenge_method": "S256",
    "state": "s",
}


async def sdk(request: Request) -> PlainTextResponse:
    return PlainTextResponse("the SDK's handler: " + (await request.body()).decode())


async def get_client(client_id: str):
    return CLIENTS.get(client_id)


def ask(params: dict, method: str = "GET", consented: tuple[str, ...] = ()) -> httpx2.Response:
    inner = Starlette(routes=[Route("/authorize", sdk, methods=["GET", "POST"])])
    app = AuthorizeFront(inner, get_client, lambda cid: cid in consented)

    async def main() -> httpx2.Response:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://t") as c:
            if method == "POST":
                return await c.post("/authorize", data=params)
            return await c.get("/authorize?" + urlencode(params))

    return anyio.run(main)


def test_a_bad_pkce_parameter_is_a_page_not_a_redirect_to_the_registered_uri():
    for params in (
        {**GOOD, "client_id": "evil", "redirect_uri": "http://evil.example/cb", "code_challenge_method": "plain"},
        {**GOOD, "code_challenge_method": "plain"},
        {k: v for k, v in GOOD.items() if k != "code_challenge"},
    ):
        got = ask(params)
        assert got.status_code == 400 and "location" not in got.headers and "malformed" in got.text
        assert "frame-ancestors 'none'" in got.headers["content-security-policy"]


def test_an_unknown_client_a_foreign_uri_or_a_stored_bad_uri_is_a_page():
    assert "No client &#x27;nobody&#x27;" in ask({**GOOD, "client_id": "nobody"}).text  # escaped
    assert "not registered" in ask({**GOOD, "redirect_uri": "https://evil.example/cb"}).text
    stored_before = ask({**GOOD, "client_id": "evil", "redirect_uri": "http://evil.example/cb"})
    assert stored_before.status_code == 400 and "not an https URL" in stored_before.text


def test_a_scope_error_redirects_only_for_a_client_the_owner_allowed():
    assert "not registered with scope mp:write" in ask({**GOOD, "scope": "mp:write"}).text
    assert ask({**GOOD, "scope": "mp:write"}, consented=("good",)).text.startswith("the SDK's handler")


def test_a_good_request_goes_on_and_a_post_keeps_its_body():
    assert ask(GOOD).text.startswith("the SDK's handler")
    posted = ask(GOOD, method="POST")
    assert posted.status_code == 200 and "client_id=good" in posted.text
