"""The consent page: it names the client (escaped), refuses a form without its CSRF cookie,
denies with access_denied, grants reading only when the owner unticks mp:write, and knows
nothing of an unknown request. (Lockout through the real server: tests/e2e/cmd_mcp/test_oauth.py.)"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.server.auth.provider import AuthorizationParams
from mcp.shared.auth import OAuthClientInformationFull
from starlette.applications import Starlette

from mp_engine.client.mcp.consent import Consent
from mp_engine.client.mcp.provider import Provider
from mp_engine.client.mcp.store import Store

PASS = "the owner's passphrase"


def setup(tmp_path):
    provider = Provider(Store(tmp_path / "s.db"), "http://127.0.0.1:8765")
    client = OAuthClientInformationFull(
        client_id="c1", client_name="<script>alert(1)</script>", redirect_uris=["https://chatgpt.com/cb"]
    )
    anyio.run(provider.register_client, client)
    params = AuthorizationParams(
        state="st",
        scopes=["mp:read", "mp:write"],
        code_challenge="x" * 43,
        redirect_uri="https://chatgpt.com/cb",
        redirect_uri_provided_explicitly=True,
    )
    url = anyio.run(provider.authorize, client, params)
    return provider, url.removeprefix("http://127.0.0.1:8765")


def fields(page: str) -> dict[str, str]:
    return dict(re.findall(r'name="(request|csrf)" value="([^"]+)"', page))


def exchange(app_url, tmp_path, answers, with_cookie=True):
    provider, path = app_url

    async def main():
        app = Starlette(routes=Consent(provider, PASS).routes())
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8765") as c:
            page = await c.get(path)
            if page.status_code != 200:
                return page, None
            cookie = {"Cookie": page.headers["set-cookie"].split(";", 1)[0]} if with_cookie else {}
            c.cookies.clear()
            back = await c.post("/consent", data={**fields(page.text), **answers}, headers=cookie)
            return page, back

    return anyio.run(main)


def test_the_page_names_the_client_escaped_and_frames_nothing(tmp_path):
    page, back = exchange(setup(tmp_path), tmp_path, {"passphrase": PASS, "decision": "allow", "scope_write": "1"})
    assert "&lt;script&gt;" in page.text and "<script>" not in page.text
    assert (
        page.headers["x-frame-options"] == "DENY"
        and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    )
    assert (
        "mp:write" in page.text
        and 'type="password"' in page.text
        and "<script" not in page.text.replace("&lt;script", "")
    )
    assert back.status_code == 302
    query = parse_qs(urlsplit(back.headers["location"]).query)
    assert query["state"] == ["st"] and len(query["code"][0]) > 30


def test_without_the_csrf_cookie_the_form_is_refused(tmp_path):
    page, back = exchange(setup(tmp_path), tmp_path, {"passphrase": PASS, "decision": "allow"}, with_cookie=False)
    assert back.status_code == 403


def test_deny_sends_access_denied_and_reading_only_is_a_choice(tmp_path):
    _, denied = exchange(setup(tmp_path / "a"), tmp_path, {"decision": "deny"})
    assert parse_qs(urlsplit(denied.headers["location"]).query)["error"] == ["access_denied"]
    provider, path = app_url = setup(tmp_path / "b")
    _, back = exchange(app_url, tmp_path, {"passphrase": PASS, "decision": "allow"})  # mp:write unticked
    code = parse_qs(urlsplit(back.headers["location"]).query)["code"][0]
    assert provider.store.code(code, "c1")["scopes"] == ["mp:read"]


def test_an_unknown_or_used_request_is_gone(tmp_path):
    app_url = setup(tmp_path)
    exchange(app_url, tmp_path, {"passphrase": PASS, "decision": "allow"})
    page, back = exchange(app_url, tmp_path, {"passphrase": PASS, "decision": "allow"})
    assert page.status_code == 404 and "expired" in page.text and back is None
