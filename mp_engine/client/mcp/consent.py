"""The consent page of `mp-engine mcp`'s OAuth server: `GET /consent?request=ID` names the
client and the scopes it asks for; the owner approves by entering the server's passphrase
(`--owner-passphrase-file` or `$MP_ENGINE_MCP_PASSPHRASE`) and may leave `mp:write` out.

- The passphrase is compared in constant time (on SHA-256 digests, so its length does not
  show either). Five wrong answers in a row from one address lock that address out for 15
  minutes (429, kept in the store, so a restart does not reset it).
- The form is CSRF-protected (double submit: a hidden field equal to a SameSite=Strict
  cookie, both random per request) and needs no JavaScript. The page may not be framed.
- Approval sends the browser on to the client's redirect URI with a code; "Deny" with
  `error=access_denied`. It does so with a page that moves on by itself (a meta refresh,
  and a link), not with a redirect: the form's `form-action 'self'` stays exact (see
  `_onward`, issue #44).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import time

import structlog
from mcp.server.auth.provider import construct_redirect_uri
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from mp_engine.client.mcp.guard import refuse_because
from mp_engine.client.mcp.provider import READ, WRITE, Provider
from mp_engine.client.mcp.store import LOCKOUT_FAILURES, LOCKOUT_SECONDS

log = structlog.get_logger("mp_engine.mcp")
CSRF_COOKIE = "mp_engine_csrf"
HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}
# The page that moves on holds no form and no script; the code it carries must not stay in
# a cache, and no-referrer keeps the consent URL from the client.
ONWARD_HEADERS = {
    **HEADERS,
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
}
WHAT = {
    READ: "read the engine's state and results (get_status, list_results, get_run_file, wait_result)",
    WRITE: "send MPs, approve halts, cancel and answer (send_mp, approve, cancel, answer): code runs on the engine host",
}

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mp-engine: allow {client}?</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em}}
label{{display:block;margin:.5em 0}} .err{{color:#b00020}} button{{font-size:1em;margin-right:1em}}</style>
</head><body>
<h1>Allow {client} to use mp-engine?</h1>
<p><b>{client}</b> (client id <code>{client_id}</code>) asks to connect to the engine at
<code>{resource}</code>. It will be able to:</p>
<form method="post" action="consent">
<input type="hidden" name="request" value="{request_id}">
<input type="hidden" name="csrf" value="{csrf}">
{scopes}
<p>It will be sent back to <code>{redirect}</code>.</p>
{error}
<label>The server's passphrase: <input type="password" name="passphrase" autocomplete="current-password"
 autofocus></label>
<p><button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button></p>
</form></body></html>
"""

ONWARD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mp-engine: back to {client}</title>
<meta http-equiv="refresh" content="0; url={url}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em}}</style>
</head><body>
<p>{outcome} Going back to {client}&hellip;</p>
<p>If nothing happens, <a href="{url}">continue to {client}</a>.</p>
</body></html>
"""


class Consent:
    def __init__(self, provider: Provider, passphrase: str):
        self.provider = provider
        self.store = provider.store
        self._digest = hashlib.sha256(passphrase.encode()).digest()

    def routes(self) -> list[Route]:
        return [Route("/consent", self.handle, methods=["GET", "POST"])]

    async def handle(self, request: Request) -> Response:
        if request.method == "GET":
            return self._page(request.query_params.get("request", ""), None)
        form = await request.form()
        request_id = str(form.get("request", ""))
        pending = self.store.pending(request_id)
        if pending is None:
            return _gone()
        client_id, params, csrf = pending
        name = self._name(client_id)
        sent = str(form.get("csrf", ""))
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not (
            hmac.compare_digest(sent.encode(), csrf.encode()) and hmac.compare_digest(cookie.encode(), csrf.encode())
        ):
            refuse_because(request, f"the consent form came without its CSRF cookie, for {self._who(client_id)}")
            return HTMLResponse("<p>The form expired or came from elsewhere: start again from the client.</p>", 403)
        address = request.client.host if request.client else "?"
        if form.get("decision") == "deny":
            self.store.drop_pending(request_id)
            log.info("mcp_consent", client_id=client_id, outcome="denied", address=address)
            return _onward(
                params,
                name,
                "You denied the request.",
                error="access_denied",
                error_description="the owner denied the request",
            )
        refused = self._passphrase(request, str(form.get("passphrase", "")), address, request_id, client_id)
        if refused is not None:
            return refused
        granted = [s for s in params["scopes"] if s == READ or (s == WRITE and form.get("scope_write"))]
        if READ not in granted:
            granted.insert(0, READ)
        self.store.drop_pending(request_id)
        code = self.provider.grant(client_id, params, granted)
        log.info("mcp_consent", client_id=client_id, outcome="allowed", scopes=granted, address=address)
        return _onward(params, name, "Allowed.", code=code)

    def _passphrase(
        self, request: Request, given: str, address: str, request_id: str, client_id: str
    ) -> Response | None:
        """None when `given` is the passphrase; otherwise the refusal (the page again, or locked out)."""
        who = self._who(client_id)
        now = time.time()
        locked = self.store.locked_until(address, now)
        if locked is not None:
            refuse_because(request, f"locked out after {LOCKOUT_FAILURES} wrong passphrases, for {who}")
            return _locked(locked - now)
        if hmac.compare_digest(hashlib.sha256(given.encode()).digest(), self._digest):
            self.store.succeed(address)
            return None
        count = self.store.fail(address, now)
        log.warning("mcp_consent", client_id=client_id, outcome="wrong passphrase", address=address, failures=count)
        refuse_because(request, f"wrong passphrase for {who}" + ("; locked out" if count == 0 else ""))
        if count == 0:  # that was the last try
            return _locked(LOCKOUT_SECONDS)
        left = LOCKOUT_FAILURES - count
        tries = f"{left} more {'try' if left == 1 else 'tries'}"
        return self._page(request_id, f"Wrong passphrase. {tries}, then 15 minutes locked out.", 401)

    def _name(self, client_id: str) -> str:
        info = self.store.client(client_id) or {}
        return str(info.get("client_name") or "An unnamed client")[:100]

    def _who(self, client_id: str) -> str:
        """The client in a refusal's reason; repr, as the name is the client's own text."""
        return f"client {client_id} ({self._name(client_id)!r})"

    def _page(self, request_id: str, error: str | None, status: int = 200) -> Response:
        pending = self.store.pending(request_id)
        if pending is None:
            return _gone()
        client_id, params, csrf = pending
        boxes = []
        for scope in params["scopes"]:
            if scope == WRITE:  # the owner may grant reading only
                boxes.append(
                    f'<label><input type="checkbox" name="scope_write" value="1" checked> <code>{WRITE}</code>: {html.escape(WHAT[WRITE])}</label>'
                )
            elif scope in WHAT:
                boxes.append(
                    f'<label><input type="checkbox" checked disabled> <code>{scope}</code>: {html.escape(WHAT[scope])}</label>'
                )
        body = PAGE.format(
            client=html.escape(self._name(client_id)),
            client_id=html.escape(client_id),
            resource=html.escape(self.provider.public_url),
            request_id=html.escape(request_id),
            csrf=html.escape(csrf),
            scopes="\n".join(boxes),
            redirect=html.escape(str(params["redirect_uri"])),
            error=f'<p class="err">{html.escape(error)}</p>' if error else "",
        )
        response = HTMLResponse(body, status, headers=HEADERS)
        response.set_cookie(
            CSRF_COOKIE, csrf, httponly=True, samesite="strict", secure=self.provider.public_url.startswith("https:")
        )
        return response


def _onward(params: dict, client: str, outcome: str, **query: str) -> Response:
    """The answer to the form: a page that sends the browser on to the client's redirect URI.

    Not a 302: Chromium (and Safari) check `form-action` against every redirect that follows
    a form's POST, so the form's `form-action 'self'` blocked the 302 to the client, with
    only a console message (issue #44; whether they should is w3c/webappsec-csp#8, open since
    2015; Firefox checks the form's action alone). Adding the redirect URI's origin to
    `form-action` would not be enough: the client's endpoint may redirect again (claude.ai's
    goes on to `claude://`, PrefectHQ/fastmcp#3372), and Chromium checks that hop too. A
    navigation a page starts (a meta refresh, a link) is no form submission, so no browser
    checks it against `form-action`, whatever the scheme or port of the redirect URI. The
    link serves a browser that does not refresh (Firefox's accessibility.blockautorefresh)
    or that asks before opening a custom scheme.
    """
    url = construct_redirect_uri(str(params["redirect_uri"]), state=params.get("state"), **query)
    body = ONWARD.format(url=html.escape(url), client=html.escape(client), outcome=html.escape(outcome))
    return HTMLResponse(body, 200, headers=ONWARD_HEADERS)


def _gone() -> Response:
    return HTMLResponse(
        "<p>This consent request is unknown or expired (they last 10 minutes): connect again from the client.</p>",
        404,
        headers=HEADERS,
    )


def _locked(seconds: float) -> Response:
    minutes = max(1, round(seconds / 60))
    return HTMLResponse(
        f"<p>Too many wrong passphrases from this address: try again in {minutes} minutes.</p>",
        429,
        headers={**HEADERS, "Retry-After": str(int(seconds) + 1)},
    )
