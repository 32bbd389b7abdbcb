"""The OAuth 2.1 authorization server of `mp-engine mcp`, as the MCP SDK's
`OAuthAuthorizationServerProvider`: the SDK serves the endpoints (RFC 8414 metadata, RFC 7591
registration, /authorize with PKCE S256, /token, /revoke) and calls this for state.

- `authorize` does not grant anything: it parks the request and sends the browser to the
  consent page (consent.py), where the owner approves with the server's passphrase; the
  page then calls `grant` for a code.
- Registration keeps to gate/registration.py's bounds (a refused client is a
  RegistrationError, the SDK's 400); a client no one allowed is forgotten after an hour.
- Codes work once, for 5 minutes. Access tokens live an hour (`access_ttl`), refresh tokens
  30 days; a refresh rotates both (the old pair stops working). Revoking an access token
  ends its pair, a refresh token every token of its consent.
- Every token issued from one consent is a family (OAuth 2.1 §4.3.1, RFC 6749 §4.1.2): a
  code used a second time, or a refresh token used after its rotation, means someone else
  holds it, and the whole family ends, with an `mcp_refused` event naming the client.
- A static bearer token (`--token`, for scripts and the Agents SDK) is accepted beside
  OAuth tokens, compared in constant time, with every scope.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from typing import Any

import structlog
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mp_engine.client.mcp.gate.limits import Limits
from mp_engine.client.mcp.gate.registration import REGISTERING_FROM, metadata_problem
from mp_engine.client.mcp.store import Store, TokenRow

READ, WRITE = "mp:read", "mp:write"
SCOPES = [READ, WRITE]
CODE_TTL = 5 * 60
CONSENT_TTL = 10 * 60
REFRESH_TTL = 30 * 24 * 3600
STATIC_CLIENT = "static-token"
log = structlog.get_logger("mp_engine.mcp")


class Provider:
    """`OAuthAuthorizationServerProvider` over the SQLite `Store`."""

    def __init__(
        self,
        store: Store,
        public_url: str,
        static_token: str | None = None,
        access_ttl: int = 3600,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.public_url = public_url.rstrip("/")
        self.static_token = static_token.encode() if static_token else None
        self.access_ttl = access_ttl
        self.limits = limits or Limits()
        self.clock = clock

    # -- clients ---------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        self.store.forget_unconsented(self.clock() - self.limits.unconsented_client_s)
        info = self.store.client(client_id)
        return OAuthClientInformationFull.model_validate(info) if info else None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if not client_info.scope:
            client_info.scope = " ".join(SCOPES)
        info = client_info.model_dump(mode="json", exclude_none=True)
        problem = metadata_problem(info, self.limits)
        if problem is not None:
            raise RegistrationError(error=problem[0], error_description=problem[1])  # type: ignore[arg-type]
        self.store.add_client(info, address=REGISTERING_FROM.get())

    def who(self, client_id: str) -> str:
        """The client in an event's reason; repr, as the name is the client's own text."""
        info = self.store.client(client_id) or {}
        return f"client {client_id} ({str(info.get('client_name') or 'unnamed')[:100]!r})"

    # -- authorization ---------------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Park the request; the browser goes to the consent page."""
        request_id = secrets.token_urlsafe(24)
        data = params.model_dump(mode="json")
        data["scopes"] = params.scopes or (client.scope or " ".join(SCOPES)).split()
        csrf = secrets.token_urlsafe(24)
        self.store.add_pending(
            request_id, str(client.client_id), data, csrf, CONSENT_TTL, keep=self.limits.pending_per_client
        )
        return f"{self.public_url}/consent?request={request_id}"

    def grant(self, client_id: str, params: dict[str, Any], scopes: list[str]) -> str:
        """An authorization code for an approved consent request (consent.py); the client
        is allowed from now on (no longer forgotten)."""
        self.store.consent(client_id)
        code = secrets.token_urlsafe(32)
        self.store.add_code(
            code,
            client_id,
            {
                "code": "",  # the code itself is only in the redirect; the store keys it by hash
                "scopes": scopes,
                "expires_at": self.clock() + CODE_TTL,
                "client_id": client_id,
                "code_challenge": params["code_challenge"],
                "redirect_uri": params["redirect_uri"],
                "redirect_uri_provided_explicitly": params["redirect_uri_provided_explicitly"],
                "resource": params.get("resource"),
                "subject": "owner",
            },
        )
        return code

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        found = self.store.code(authorization_code, str(client.client_id))
        if found is None:
            return None
        data, family = found
        if family is not None:  # used before: whoever sent it again, the tokens it bought end
            self._reused(str(client.client_id), family, "an authorization code was used a second time")
            return None
        return AuthorizationCode.model_validate({**data, "code": authorization_code})

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        family = secrets.token_urlsafe(12)
        if not self.store.take_code(authorization_code.code, family, self.clock() + REFRESH_TTL):
            raise TokenError(error="invalid_grant", error_description="the authorization code was already used")
        return self._issue(str(client.client_id), authorization_code.scopes, authorization_code.resource, family)

    def _reused(self, client_id: str, family: str, what: str) -> None:
        ended = self.store.end_family(family)
        log.warning(
            "mcp_refused",
            status=400,
            path="/token",
            client_id=client_id,
            reason=f"{what}, for {self.who(client_id)}: someone else may hold it; the {ended} live tokens issued "
            "from the same consent are revoked (the client must ask the owner again)",
        )

    # -- tokens ------------------------------------------------------------------------

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, family: str) -> OAuthToken:
        grant_id, now = secrets.token_urlsafe(12), self.clock()
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        for token, kind, ttl in ((access, "access", self.access_ttl), (refresh, "refresh", REFRESH_TTL)):
            self.store.add_token(token, TokenRow(kind, client_id, grant_id, scopes, resource, now + ttl, family))
        return OAuthToken(
            access_token=access, expires_in=self.access_ttl, scope=" ".join(scopes), refresh_token=refresh
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        """A live refresh token, or one rotated away (`rotated`): the exchange then ends its
        family, a revocation leaves it (only /token is a reuse)."""
        row = self.store.token(refresh_token, "refresh")
        rotated = row is None
        row = row or self.store.token(refresh_token, "refresh", rotated=True)
        if row is None or row.client_id != client.client_id:
            return None
        return _loaded(_Refresh, refresh_token, row, rotated=rotated)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        assert isinstance(refresh_token, _Refresh)
        if refresh_token.rotated or not self.store.rotate(refresh_token.grant_id):  # the old pair ends here
            self._reused(str(client.client_id), refresh_token.family, "a refresh token was used after its rotation")
            raise TokenError(error="invalid_grant", error_description="the refresh token was already used")
        return self._issue(str(client.client_id), scopes, refresh_token.resource, refresh_token.family)

    async def load_access_token(self, token: str) -> AccessToken | None:
        if self.static_token is not None and hmac.compare_digest(token.encode(), self.static_token):
            return AccessToken(token="static", client_id=STATIC_CLIENT, scopes=list(SCOPES))
        row = self.store.token(token, "access")
        if row is None:
            return None
        self.store.touch(row.client_id, self.clock())
        return _loaded(_Access, token, row)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        """An access token ends its pair; a refresh token every token of its consent
        (RFC 7009 §2.1)."""
        if isinstance(token, _Refresh):
            if not token.rotated:
                self.store.end_family(token.family)
        elif isinstance(token, _Access):
            self.store.end_grant(token.grant_id)

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise TokenError(error="unsupported_grant_type", error_description="only authorization codes are supported")


class _Access(AccessToken):
    grant_id: str
    family: str


class _Refresh(RefreshToken):
    grant_id: str
    family: str
    rotated: bool = False


def _loaded(cls: type[_Access] | type[_Refresh], token: str, row: TokenRow, **more: Any) -> Any:
    """A stored token as the SDK's model, with the grant it belongs to (rotation, revocation)."""
    return cls(
        token=token,
        client_id=row.client_id,
        scopes=row.scopes,
        expires_at=int(row.expires_at),
        resource=row.resource,
        subject="owner",
        grant_id=row.grant_id,
        family=row.family or row.grant_id,
        **more,
    )
