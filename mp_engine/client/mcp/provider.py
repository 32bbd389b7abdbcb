"""The OAuth 2.1 authorization server of `mp-engine mcp`, as the MCP SDK's
`OAuthAuthorizationServerProvider`: the SDK serves the endpoints (RFC 8414 metadata, RFC 7591
registration, /authorize with PKCE S256, /token, /revoke) and calls this for state.

- `authorize` does not grant anything: it parks the request and sends the browser to the
  consent page (consent.py), where the owner approves with the server's passphrase; the
  page then calls `grant` for a code.
- Codes work once, for 5 minutes. Access tokens live an hour (`access_ttl`), refresh tokens
  30 days; a refresh rotates both (the old pair stops working). Revoking either token of a
  pair ends both.
- A static bearer token (`--token`, for scripts and the Agents SDK) is accepted beside
  OAuth tokens, compared in constant time, with every scope.
"""

from __future__ import annotations

import hmac
import secrets
import time
from typing import Any

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mp_engine.client.mcp.store import Store, TokenRow

READ, WRITE = "mp:read", "mp:write"
SCOPES = [READ, WRITE]
CODE_TTL = 5 * 60
CONSENT_TTL = 10 * 60
REFRESH_TTL = 30 * 24 * 3600
STATIC_CLIENT = "static-token"


class Provider:
    """`OAuthAuthorizationServerProvider` over the SQLite `Store`."""

    def __init__(self, store: Store, public_url: str, static_token: str | None = None, access_ttl: int = 3600):
        self.store = store
        self.public_url = public_url.rstrip("/")
        self.static_token = static_token.encode() if static_token else None
        self.access_ttl = access_ttl

    # -- clients ---------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        info = self.store.client(client_id)
        return OAuthClientInformationFull.model_validate(info) if info else None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if not client_info.scope:
            client_info.scope = " ".join(SCOPES)
        self.store.add_client(client_info.model_dump(mode="json", exclude_none=True))

    # -- authorization ---------------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Park the request; the browser goes to the consent page."""
        request_id = secrets.token_urlsafe(24)
        data = params.model_dump(mode="json")
        data["scopes"] = params.scopes or (client.scope or " ".join(SCOPES)).split()
        self.store.add_pending(request_id, str(client.client_id), data, secrets.token_urlsafe(24), CONSENT_TTL)
        return f"{self.public_url}/consent?request={request_id}"

    def grant(self, client_id: str, params: dict[str, Any], scopes: list[str]) -> str:
        """An authorization code for an approved consent request (consent.py)."""
        code = secrets.token_urlsafe(32)
        self.store.add_code(
            code,
            client_id,
            {
                "code": "",  # the code itself is only in the redirect; the store keys it by hash
                "scopes": scopes,
                "expires_at": time.time() + CODE_TTL,
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
        data = self.store.code(authorization_code, str(client.client_id))
        return AuthorizationCode.model_validate({**data, "code": authorization_code}) if data else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if not self.store.take_code(authorization_code.code):
            raise TokenError(error="invalid_grant", error_description="the authorization code was already used")
        return self._issue(str(client.client_id), authorization_code.scopes, authorization_code.resource)

    # -- tokens ------------------------------------------------------------------------

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        grant_id, now = secrets.token_urlsafe(12), time.time()
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.store.add_token(access, TokenRow("access", client_id, grant_id, scopes, resource, now + self.access_ttl))
        self.store.add_token(refresh, TokenRow("refresh", client_id, grant_id, scopes, resource, now + REFRESH_TTL))
        return OAuthToken(
            access_token=access, expires_in=self.access_ttl, scope=" ".join(scopes), refresh_token=refresh
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        row = self.store.token(refresh_token, "refresh")
        if row is None or row.client_id != client.client_id:
            return None
        return _loaded(_Refresh, refresh_token, row)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        grant = getattr(refresh_token, "grant_id", None)
        if grant is None or self.store.end_grant(grant) == 0:  # rotation: the old pair ends here
            raise TokenError(error="invalid_grant", error_description="the refresh token was already used")
        return self._issue(str(client.client_id), scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        if self.static_token is not None and hmac.compare_digest(token.encode(), self.static_token):
            return AccessToken(token="static", client_id=STATIC_CLIENT, scopes=list(SCOPES))
        row = self.store.token(token, "access")
        if row is None:
            return None
        self.store.touch(row.client_id, time.time())
        return _loaded(_Access, token, row)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        grant = getattr(token, "grant_id", None)
        if grant is not None:
            self.store.end_grant(grant)

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise TokenError(error="unsupported_grant_type", error_description="only authorization codes are supported")


class _Access(AccessToken):
    grant_id: str


class _Refresh(RefreshToken):
    grant_id: str


def _loaded(cls: type[_Access] | type[_Refresh], token: str, row: TokenRow) -> Any:
    """A stored token as the SDK's model, with the grant it belongs to (rotation, revocation)."""
    return cls(
        token=token,
        client_id=row.client_id,
        scopes=row.scopes,
        expires_at=int(row.expires_at),
        resource=row.resource,
        subject="owner",
        grant_id=row.grant_id,
    )
