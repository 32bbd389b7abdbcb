"""The consent page: it names the client (escaped), refuses a form without its CSRF cookie,
denies with access_denied, grants reading only when the owner unticks mp:write, and knows
nothing of an unknown request. Its answer is a page that moves the browser on to the
client's redirect URI, whatever its scheme, under a CSP as strict as the form's; a wrong
passphrase is logged as one. The lockout (issue #46) with the test's own clock: per request, per address, the server's
backoff that ends, and the owner's approval from the host. (Through the real server:
tests/e2e/cmd_mcp/test_harden.py; in a real browser: tests/e2e/cmd_mcp/test_consent_browser.py.)"""

from __future__ import annotations

import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp.server.auth.provider import AuthorizationParams
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyUrl
from starlette.applications import Starlette

from mp_engine.client.mcp.consent import Consent
from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.client.mcp.gate.registration import redirect_uri_problem
from mp_engine.client.mcp.guard import Guard, resolve
from mp_engine.client.mcp.provider import Provider
from mp_engine.client.mcp.store import Store

PASS = "the owner's passphrase"
CHATGPT = "https://chatgpt.com/cb"


def setup(tmp_path, redirect_uri=CHATGPT, limits=None, clock=None):
    provider = Provider(Store(tmp_path / "s.db"), "http://127.0.0.1:8765", limits=limits)
    client = OAuthClientInformationFull(
        client_id="c1", client_name="<script>alert(1)</script>", redirect_uris=[redirect_uri]
    )
    if redirect_uri_problem(redirect_uri) is None:
        anyio.run(provider.register_client, client)
    else:  # a native app's own scheme: only the owner adds such a client, by hand
        provider.store.add_client(client.model_dump(mode="json", exclude_none=True), consented=True)
    params = AuthorizationParams(
        state="st",
        scopes=["mp:read", "mp:write"],
        code_challenge="x" * 43,
        redirect_uri=redirect_uri,
        redirect_uri_provided_explicitly=True,
    )
    url = anyio.run(provider.authorize, client, params)
    return provider, url.removeprefix("http://127.0.0.1:8765")


def fields(page: str) -> dict[str, str]:
    return dict(re.findall(r'name="(request|csrf)" value="([^"]+)"', page))


def moved_to(answer) -> str:
    """Where the answer's page sends the browser: its meta refresh, which its link repeats."""
    assert answer.status_code == 200, answer.text
    refresh = re.search(r'<meta http-equiv="refresh" content="0; url=([^"]+)">', answer.text)
    link = re.search(r'<a href="([^"]+)">', answer.text)
    assert refresh and link and refresh.group(1) == link.group(1), answer.text
    return html.unescape(refresh.group(1))


def exchange(app_url, tmp_path, answers, with_cookie=True):
    provider, path = app_url

    async def main():
        app = Guard(Starlette(routes=Consent(provider, PASS).routes()), resolve(None, "127.0.0.1", 8765))
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
    url = moved_to(back)
    assert url.startswith(CHATGPT + "?")
    query = parse_qs(urlsplit(url).query)
    assert query["state"] == ["st"] and len(query["code"][0]) > 30


def test_the_form_may_post_only_to_itself_and_the_answer_may_post_nowhere(tmp_path):
    """Issue #44: the form's policy stays `form-action 'self'`, not widened to the client's
    origin; the answer moves on by a page (no form submission for a browser to check)."""
    page, back = exchange(setup(tmp_path), tmp_path, {"passphrase": PASS, "decision": "allow"})
    form = page.headers["content-security-policy"]
    assert "form-action 'self';" in form and "chatgpt.com" not in form and "default-src 'none'" in form
    policy = back.headers["content-security-policy"]
    assert "form-action 'none'" in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert back.headers["cache-control"] == "no-store" and back.headers["referrer-policy"] == "no-referrer"
    assert "location" not in back.headers and "<form" not in back.text and "<script" not in back.text


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "http://localhost:33418/callback",  # a native client's loopback listener (RFC 8252 §7.3)
        "com.example.app:/oauth2redirect?from=a&b=c",  # a private-use scheme (RFC 8252 §7.1), added by hand
        'cursor://anysphere.cursor-retrieval/oauth/callback?x=1&y="q"',  # the same
    ],
)
def test_a_native_clients_redirect_uri_is_where_the_page_goes(tmp_path, redirect_uri):
    _, back = exchange(setup(tmp_path, redirect_uri), tmp_path, {"passphrase": PASS, "decision": "allow"})
    url = moved_to(back)
    base = str(AnyUrl(redirect_uri))
    assert url.startswith(base + ("&" if "?" in base else "?")), url
    assert parse_qs(urlsplit(url).query)["state"] == ["st"]
    assert '"q"' not in back.text  # the URL's own characters are escaped in the page


def test_without_the_csrf_cookie_the_form_is_refused(tmp_path):
    page, back = exchange(setup(tmp_path), tmp_path, {"passphrase": PASS, "decision": "allow"}, with_cookie=False)
    assert back.status_code == 403


def test_a_wrong_passphrase_is_logged_as_one_with_the_client_not_as_the_page(tmp_path, capsys):
    from mp_engine.record import logs

    logs.configure("info")
    page, back = exchange(setup(tmp_path), tmp_path, {"passphrase": "not it", "decision": "allow"})
    assert back.status_code == 401 and "Wrong passphrase. 4 more tries" in back.text
    assert not any("refused" in k for k in back.headers)  # the reason stays on the server
    refused = [json.loads(line) for line in capsys.readouterr().err.splitlines() if '"mcp_refused"' in line]
    assert [(e["status"], e["reason"]) for e in refused] == [
        (401, "wrong passphrase for client c1 ('<script>alert(1)</script>')")
    ]


def test_deny_sends_access_denied_and_reading_only_is_a_choice(tmp_path):
    _, denied = exchange(setup(tmp_path / "a"), tmp_path, {"decision": "deny"})
    assert parse_qs(urlsplit(moved_to(denied)).query)["error"] == ["access_denied"]
    provider, path = app_url = setup(tmp_path / "b")
    _, back = exchange(app_url, tmp_path, {"passphrase": PASS, "decision": "allow"})  # mp:write unticked
    code = parse_qs(urlsplit(moved_to(back)).query)["code"][0]
    assert provider.store.code(code, "c1")[0]["scopes"] == ["mp:read"]


def test_an_unknown_or_used_request_is_gone(tmp_path):
    app_url = setup(tmp_path)
    exchange(app_url, tmp_path, {"passphrase": PASS, "decision": "allow"})
    page, back = exchange(app_url, tmp_path, {"passphrase": PASS, "decision": "allow"})
    assert page.status_code == 404 and "expired" in page.text and back is None


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def browser(tmp_path, clock: Clock, peer: str = "127.0.0.1"):
    """A consent app with the test's clock, and a function that opens a new consent request
    (a new client when asked) and answers it, from `peer`, through the app."""
    provider = Provider(Store(tmp_path / "s.db"), "http://127.0.0.1:8765", clock=clock)
    app = Guard(Starlette(routes=Consent(provider, PASS, clock=clock).routes()), resolve(None, "127.0.0.1", 8765))
    made = {"clients": 0}

    def new_request(client_id: str) -> str:
        if provider.store.client(client_id) is None:
            info = OAuthClientInformationFull(client_id=client_id, client_name=client_id, redirect_uris=[CHATGPT])
            anyio.run(provider.register_client, info)
            made["clients"] += 1
        params = AuthorizationParams(
            state="st",
            scopes=["mp:read"],
            code_challenge="x" * 43,
            redirect_uri=CHATGPT,
            redirect_uri_provided_explicitly=True,
        )
        url = anyio.run(provider.authorize, anyio.run(provider.get_client, client_id), params)
        return url.removeprefix("http://127.0.0.1:8765")

    def answer(path: str, passphrase: str) -> httpx2.Response:
        async def main():
            transport = httpx2.ASGITransport(app=app, client=(peer, 5000))
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
                page = await c.get(path)
                if page.status_code != 200:
                    return page
                cookie = {"Cookie": page.headers["set-cookie"].split(";", 1)[0]}
                c.cookies.clear()
                data = {**fields(page.text), "passphrase": passphrase, "decision": "allow"}
                return await c.post("/consent", data=data, headers=cookie)

        return anyio.run(main)

    return provider, new_request, answer


def test_one_request_takes_five_wrong_answers_then_no_more_but_the_owners_next_request_works(tmp_path):
    """Issue #46: no address counts behind a tunnel nobody vouches for, so five wrong tries
    close that request, not the shared address (the owner's)."""
    clock = Clock()
    provider, new_request, answer = browser(tmp_path, clock)
    guessed = new_request("guesser")
    statuses = [answer(guessed, "wrong").status_code for _ in range(6)]
    assert statuses == [401, 401, 401, 401, 429, 429]
    locked = answer(guessed, PASS)
    assert locked.status_code == 429 and "mp-engine mcp approve-login" in locked.text
    assert answer(new_request("owner"), PASS).status_code == 200


def test_rotating_requests_and_clients_meets_the_servers_backoff_which_ends(tmp_path):
    clock = Clock()
    limits = Limits()
    provider, new_request, answer = browser(tmp_path, clock)
    statuses = [answer(new_request(f"c{n // 3}"), "wrong").status_code for n in range(limits.global_failures)]
    assert statuses[:-1] == [401] * (limits.global_failures - 1) and statuses[-1] == 429
    owner = new_request("owner")
    waiting = answer(owner, PASS)  # the owner waits too, but only the backoff
    assert waiting.status_code == 429 and int(waiting.headers["retry-after"]) <= limits.backoff_max_s + 1
    assert "every passphrase waits 10 seconds" in waiting.text
    clock.now += limits.backoff_s
    assert answer(owner, PASS).status_code == 200


def test_a_vouched_address_is_locked_by_itself(tmp_path):
    clock = Clock()
    _, new_request, answer = browser(tmp_path, clock, peer="198.51.100.7")  # a direct client
    for n in range(4):
        assert answer(new_request(f"c{n}"), "wrong").status_code == 401
    assert answer(new_request("c9"), "wrong").status_code == 429
    refused = answer(new_request("c10"), PASS)
    assert refused.status_code == 429 and "Your address had 5 wrong passphrases" in refused.text
    clock.now += Limits().lockout_s + 1
    assert answer(new_request("c11"), PASS).status_code == 200


def test_the_owner_approves_on_the_host_and_the_locked_page_moves_on(tmp_path):
    from mp_engine.client.mcp.clients import approve_login

    clock = Clock()
    provider, new_request, answer = browser(tmp_path, clock)
    path = new_request("owner-client")
    for _ in range(5):
        locked = answer(path, "wrong")
    short = re.search(r"approve-login (\S+)</pre>", locked.text).group(1)
    assert 'http-equiv="refresh" content="10; url=consent?request=' in locked.text
    said: list[str] = []
    assert approve_login(provider.store.path, short, True, said.append, said.append) == 0

    async def look(with_cookie: bool):
        transport = httpx2.ASGITransport(app=Starlette(routes=Consent(provider, PASS, clock=clock).routes()))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            pending = provider.store.pending(path.rsplit("=", 1)[1])
            cookie = {"Cookie": f"mp_engine_csrf={pending.csrf}"} if with_cookie else {}
            return await c.get(path, headers=cookie)

    assert anyio.run(look, False).status_code == 403  # another browser gets nothing
    moved = anyio.run(look, True)
    code = parse_qs(urlsplit(moved_to(moved)).query)["code"][0]
    assert provider.store.code(code, "owner-client")[0]["scopes"] == ["mp:read"]  # --read-only
    assert provider.store.consented("owner-client")
