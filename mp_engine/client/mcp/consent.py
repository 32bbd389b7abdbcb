"""The consent page of `mp-engine mcp`'s OAuth server: `GET /consent?request=ID` names the
client and the scopes it asks for; the owner approves by entering the server's passphrase
(`--owner-passphrase-file` or `$MP_ENGINE_MCP_PASSPHRASE`) and may leave `mp:write` out.

- The passphrase is compared in constant time (on SHA-256 digests, so its length does not
  show either). Wrong answers count per consent request, per client, per address (one a
  trusted proxy vouches for) and on the whole server (gate/lockout.py; kept in the store,
  so a restart resets nothing). A lockout page says how long, and how the owner passes
  it: `mp-engine mcp approve-login` on the host, after which the page moves on by itself.
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
from collections.abc import Callable

import structlog
from mcp.server.auth.provider import construct_redirect_uri
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mp_engine.client.mcp.gate import lockout
from mp_engine.client.mcp.gate.body import BodyCap, megabytes
from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.client.mcp.gate.peer import distinct
from mp_engine.client.mcp.guard import PAGE_HEADERS, refuse_because
from mp_engine.client.mcp.provider import READ, WRITE, Provider
from mp_engine.client.mcp.store import Pending

log = structlog.get_logger("mp_engine.mcp")
CSRF_COOKIE = "mp_engine_csrf"
HEADERS = PAGE_HEADERS
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

# A lockout: how long, and the way past it from the host. It looks again every 10 s, so
# the owner's `approve-login` moves the browser on without a click.
LOCKED = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mp-engine: passphrases refused for now</title>
<meta http-equiv="refresh" content="10; url={again}">
<style>body{{font:16px system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em}}</style>
</head><body><h1>Passphrases refused for now</h1><p>{why}</p>
<p>If you are the owner, approve this sign-in on the host instead:</p>
<pre>mp-engine mcp approve-login {short}</pre>
<p>This page looks again every 10 seconds and moves on once you have (<a href="{again}">look now</a>).</p>
</body></html>
"""
WHY = {
    lockout.REQUEST: "This sign-in request had {n} wrong passphrases: it takes no more.",
    lockout.CLIENT: "{client} had {n} wrong passphrases in a row: it is locked out for {wait}.",
    lockout.ADDRESS: "Your address had {n} wrong passphrases in a row: it is locked out for {wait}.",
    lockout.SERVER: "This server had too many wrong passphrases, from anyone: every passphrase waits {wait}.",
}


class Consent:
    def __init__(
        self, provider: Provider, passphrase: str, limits: Limits | None = None, clock: Callable[[], float] = time.time
    ):
        self.provider = provider
        self.store = provider.store
        self.limits = limits or provider.limits
        self.clock = clock
        self._digest = hashlib.sha256(passphrase.encode()).digest()

    def routes(self) -> list[Route]:
        capped = BodyCap(self.handle_asgi, self.limits.consent_body_bytes, _too_big)
        return [Route("/consent", capped, methods=["GET", "POST"])]

    async def handle_asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.handle(Request(scope, receive))
        await response(scope, receive, send)

    async def handle(self, request: Request) -> Response:
        if request.method == "GET":
            return self._look(request, request.query_params.get("request", ""))
        form = await request.form()
        pending = self.store.pending(str(form.get("request", "")))
        if pending is None:
            return _gone()
        if not _csrf_ok(request, str(form.get("csrf", "")), pending.csrf):
            refuse_because(
                request, f"the consent form came without its CSRF cookie, for {self._who(pending.client_id)}"
            )
            return HTMLResponse("<p>The form expired or came from elsewhere: start again from the client.</p>", 403)
        address = request.client.host if request.client else "?"
        if pending.approved is not None:  # the owner approved it on the host meanwhile
            return self._grant(pending, pending.approved, "allowed on the host", address)
        if form.get("decision") == "deny":
            self.store.drop_pending(pending.id)
            log.info("mcp_consent", client_id=pending.client_id, outcome="denied", address=address)
            return _onward(
                pending.params,
                self._name(pending.client_id),
                "You denied the request.",
                error="access_denied",
                error_description="the owner denied the request",
            )
        refused = self._passphrase(request, str(form.get("passphrase", "")), pending)
        if refused is not None:
            return refused
        granted = [s for s in pending.params["scopes"] if s == READ or (s == WRITE and form.get("scope_write"))]
        return self._grant(pending, granted, "allowed", address)

    def _look(self, request: Request, request_id: str) -> Response:
        """GET: the form; the lockout page while a lock holds; the way on once the owner
        approved the request on the host (`mcp approve-login`), for the browser that has
        the request's cookie."""
        pending = self.store.pending(request_id)
        if pending is None:
            return _gone()
        if pending.approved is not None:
            if not hmac.compare_digest(request.cookies.get(CSRF_COOKIE, "").encode(), pending.csrf.encode()):
                refuse_because(
                    request, f"an approved sign-in was opened without its cookie, for {self._who(pending.client_id)}"
                )
                return HTMLResponse(
                    "<p>Approved on the host: go on in the browser that started it.</p>", 403, headers=HEADERS
                )
            address = request.client.host if request.client else "?"
            return self._grant(pending, pending.approved, "allowed on the host", address)
        now = self.clock()
        held = lockout.holding(self._strikes(self._attempt(request, pending)), now)
        if held is not None:
            refuse_because(request, f"passphrases refused ({held.kind} locked out), for {self._who(pending.client_id)}")
            return self._locked(pending, held, now)
        return self._page(pending, None)

    def _grant(self, pending: Pending, granted: list[str], outcome: str, address: str) -> Response:
        if READ not in granted:
            granted.insert(0, READ)
        self.store.drop_pending(pending.id)
        code = self.provider.grant(pending.client_id, pending.params, granted)
        log.info("mcp_consent", client_id=pending.client_id, outcome=outcome, scopes=granted, address=address)
        return _onward(pending.params, self._name(pending.client_id), "Allowed.", code=code)

    # -- the passphrase and its lockout ----------------------------------------------------

    def _attempt(self, request: Request, pending: Pending) -> lockout.Attempt:
        return lockout.Attempt(pending.id, pending.client_id, distinct(request))

    def _strikes(self, attempt: lockout.Attempt) -> dict[str, lockout.Strike]:
        keys = attempt.keys()
        stored = self.store.strikes(list(keys.values()))
        return {kind: lockout.Strike(*stored[key]) if key in stored else lockout.Strike() for kind, key in keys.items()}

    def _passphrase(self, request: Request, given: str, pending: Pending) -> Response | None:
        """None when `given` is the passphrase; otherwise the refusal (the page again, or a
        lockout). The strikes are read and written with no await between: one server's
        requests cannot interleave there."""
        who, now = self._who(pending.client_id), self.clock()
        attempt = self._attempt(request, pending)
        strikes = self._strikes(attempt)
        held = lockout.holding(strikes, now)
        if held is not None:
            refuse_because(request, f"passphrases refused ({held.kind} locked out), for {who}")
            return self._locked(pending, held, now)
        keys = attempt.keys()
        if hmac.compare_digest(hashlib.sha256(given.encode()).digest(), self._digest):
            self.store.clear_strikes(list(keys.values()))
            return None
        after, held = lockout.failed(strikes, now, self.limits)
        self.store.put_strikes(
            {keys[k]: (s.count, s.until, s.trips) for k, s in after.items()}, now, now - self.limits.lockout_s
        )
        address = request.client.host if request.client else "?"
        log.warning(
            "mcp_consent",
            client_id=pending.client_id,
            outcome="wrong passphrase",
            address=address,
            failures=after[lockout.REQUEST].count,
        )
        refuse_because(request, f"wrong passphrase for {who}" + (f"; {held.kind} locked out" if held else ""))
        if held is not None:
            return self._locked(pending, held, now)
        left = lockout.tries_left(after, self.limits)
        tries = f"{left} more {'try' if left == 1 else 'tries'}"
        return self._page(pending, f"Wrong passphrase. {tries} on this sign-in request, then it takes no more.", 401)

    def _locked(self, pending: Pending, held: lockout.Lock, now: float) -> Response:
        wait = held.until - now
        counts = {
            lockout.REQUEST: self.limits.request_failures,
            lockout.CLIENT: self.limits.client_failures,
            lockout.ADDRESS: self.limits.address_failures,
            lockout.SERVER: self.limits.global_failures,
        }
        why = WHY[held.kind].format(n=counts[held.kind], wait=_duration(wait), client=self._name(pending.client_id))
        again = f"consent?request={pending.id}"
        body = LOCKED.format(why=html.escape(why), again=html.escape(again), short=html.escape(pending.id[:10]))
        return self._with_cookie(
            HTMLResponse(body, 429, headers={**HEADERS, "Retry-After": str(int(wait) + 1)}), pending
        )

    # -- pages ---------------------------------------------------------------------------

    def _name(self, client_id: str) -> str:
        info = self.store.client(client_id) or {}
        return str(info.get("client_name") or "An unnamed client")[:100]

    def _who(self, client_id: str) -> str:
        """The client in a refusal's reason; repr, as the name is the client's own text."""
        return f"client {client_id} ({self._name(client_id)!r})"

    def _page(self, pending: Pending, error: str | None, status: int = 200) -> Response:
        boxes = []
        for scope in pending.params["scopes"]:
            if scope == WRITE:  # the owner may grant reading only
                boxes.append(
                    f'<label><input type="checkbox" name="scope_write" value="1" checked> <code>{WRITE}</code>: {html.escape(WHAT[WRITE])}</label>'
                )
            elif scope in WHAT:
                boxes.append(
                    f'<label><input type="checkbox" checked disabled> <code>{scope}</code>: {html.escape(WHAT[scope])}</label>'
                )
        body = PAGE.format(
            client=html.escape(self._name(pending.client_id)),
            client_id=html.escape(pending.client_id),
            resource=html.escape(self.provider.public_url),
            request_id=html.escape(pending.id),
            csrf=html.escape(pending.csrf),
            scopes="\n".join(boxes),
            redirect=html.escape(str(pending.params["redirect_uri"])),
            error=f'<p class="err">{html.escape(error)}</p>' if error else "",
        )
        return self._with_cookie(HTMLResponse(body, status, headers=HEADERS), pending)

    def _with_cookie(self, response: Response, pending: Pending) -> Response:
        """The request's CSRF cookie: the form needs it, and so does the way on after an
        approval on the host, for a browser that saw only the lockout page."""
        secure = self.provider.public_url.startswith("https:")
        response.set_cookie(CSRF_COOKIE, pending.csrf, httponly=True, samesite="strict", secure=secure)
        return response


def _csrf_ok(request: Request, sent: str, csrf: str) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE, "")
    return hmac.compare_digest(sent.encode(), csrf.encode()) and hmac.compare_digest(cookie.encode(), csrf.encode())


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


def _too_big(limit: int) -> Response:
    return HTMLResponse(
        f"<p>The form is larger than {megabytes(limit)}: start again from the client.</p>", 413, headers=HEADERS
    )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} seconds"
    return f"{round(seconds / 60)} minutes"
