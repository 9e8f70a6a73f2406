"""Who may call the HTTP server, and which projects each caller may use.

Two kinds of credentials, both checked through the MCP SDK's resource-server support (its
``TokenVerifier`` protocol, ``BearerAuthBackend`` and ``RequireAuthMiddleware``):

- **bearer tokens from configuration** (``[[server.auth.tokens]]``): only the SHA-256 of each
  token is configured (``memoir token new`` makes one); a presented token is hashed and compared
  with every configured hash in constant time (:func:`hmac.compare_digest`, no early exit);
- **OAuth 2.0** (the MCP authorization profile, ``[server.auth.oauth]``): tokens issued by an
  authorization server are validated by its RFC 7662 introspection endpoint, must be active, unexpired
  and issued for this server's resource URL (RFC 8707 audience); the server publishes its RFC 9728
  Protected Resource Metadata so OAuth-speaking clients find the authorization server.

Each verified token carries the workspaces its principal may use (``memoir_workspaces`` in the
access token's claims; absent: every workspace of the server), which :func:`grant_for` hands to
the scope decision.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier

from memory_core.config import AuthSettings, OAuthSettings, TokenSettings
from memory_core.errors import ConfigError
from server.principals import local_principal, token_principal

__all__ = [
    "GRANT_CLAIM",
    "ChainedVerifier",
    "HashedTokenVerifier",
    "IntrospectionVerifier",
    "build_verifier",
    "caller_principal",
    "grant_for",
    "grant_of_request",
    "hash_token",
    "new_token",
    "principal_of_request",
]

log = structlog.get_logger(__name__)

GRANT_CLAIM = "memoir_workspaces"
TOKEN_PREFIX = "memoir_"
_INTROSPECTION_TIMEOUT_S = 5.0


def new_token() -> str:
    """A fresh bearer token (256 random bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The hex SHA-256 configured for ``token`` (tokens are random: no salt or KDF needed)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _expiry(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(
            f"token {name!r} has an invalid expires value {value!r}",
            hint="write an RFC 3339 time such as 2027-01-31T00:00:00Z",
        ) from exc
    if moment.tzinfo is None:
        raise ConfigError(
            f"token {name!r} expires at {value!r} without a time zone",
            hint="end it with Z (UTC) or an offset such as +02:00",
        )
    return int(moment.timestamp())


def _claims(workspaces: Sequence[str]) -> dict[str, Any]:
    return {GRANT_CLAIM: [str(Path(w).expanduser().resolve()) for w in workspaces]}


class HashedTokenVerifier(TokenVerifier):
    """Bearer tokens configured by their SHA-256."""

    def __init__(self, tokens: Sequence[TokenSettings]) -> None:
        self._tokens = [(bytes.fromhex(t.sha256), t, _expiry(t.expires, t.name)) for t in tokens]

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode("utf-8", "replace")).digest()
        found: tuple[TokenSettings, int | None] | None = None
        for expected, config, expires_at in self._tokens:  # every hash compared: no timing hint
            if hmac.compare_digest(digest, expected):
                found = (config, expires_at)
        if found is None:
            return None
        config, expires_at = found
        if expires_at is not None and expires_at < time.time():
            log.info("expired token refused", token=config.name)
            return None
        return AccessToken(
            token=f"sha256:{config.sha256[:12]}",  # the raw token is not kept
            client_id=config.name,
            scopes=["memoir"],
            expires_at=expires_at,
            claims=_claims(config.workspaces) if config.workspaces else {},
        )


class IntrospectionVerifier(TokenVerifier):
    """OAuth access tokens, validated by the authorization server's RFC 7662 endpoint."""

    def __init__(self, oauth: OAuthSettings, *, client: Any = None) -> None:
        self._oauth = oauth
        self._client = client

    def _http(self) -> Any:
        if self._client is None:
            import httpx2  # the MCP SDK's HTTP client

            self._client = httpx2.AsyncClient(timeout=_INTROSPECTION_TIMEOUT_S)
        return self._client

    async def verify_token(self, token: str) -> AccessToken | None:
        import httpx2

        oauth = self._oauth
        auth = (oauth.client_id, oauth.client_secret or "") if oauth.client_id else None
        try:
            response = await self._http().post(
                oauth.introspection_url, data={"token": token}, auth=auth
            )
        except (httpx2.HTTPError, OSError) as exc:  # unreachable: the token is not verified
            log.warning("token introspection failed", error=type(exc).__name__)
            return None
        if response.status_code != 200:
            log.warning("token introspection refused", status=response.status_code)
            return None
        try:
            data = response.json()
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("active") is not True:
            return None
        audiences = data.get("aud") or []
        audiences = [audiences] if isinstance(audiences, str) else list(audiences)
        resource = oauth.resource_url.rstrip("/")
        issued_for = next((a for a in audiences if str(a).rstrip("/") == resource), None)
        principal = str(data.get("sub") or data.get("client_id") or "")
        granted = oauth.workspaces.get(principal)
        if granted is None and data.get("client_id"):
            granted = oauth.workspaces.get(str(data["client_id"]))
        if granted is None and oauth.workspaces:
            granted = ()  # a mapping exists and this principal is not in it: no project
        exp = data.get("exp")
        return AccessToken(
            token="introspected",
            client_id=str(data.get("client_id") or principal or "oauth"),
            scopes=str(data.get("scope") or "").split(),
            expires_at=int(exp) if isinstance(exp, int | float) else None,
            resource=issued_for or (str(audiences[0]) if audiences else None),
            subject=str(data["sub"]) if data.get("sub") else None,
            claims={"iss": data.get("iss"), **({} if granted is None else _claims(granted))},
        )


class ChainedVerifier(TokenVerifier):
    """The configured tokens first (no network), then OAuth introspection."""

    def __init__(self, verifiers: Sequence[TokenVerifier]) -> None:
        self._verifiers = list(verifiers)

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self._verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


def build_verifier(auth: AuthSettings) -> TokenVerifier | None:
    """The verifier for the configured credentials, or None when none are configured.

    Raises:
        ConfigError: an expiry time cannot be read.
    """
    verifiers: list[TokenVerifier] = []
    if auth.tokens:
        verifiers.append(HashedTokenVerifier(auth.tokens))
    if auth.oauth is not None:
        verifiers.append(IntrospectionVerifier(auth.oauth))
    if not verifiers:
        return None
    return verifiers[0] if len(verifiers) == 1 else ChainedVerifier(verifiers)


def _user_of_request(request: Any) -> AuthenticatedUser | None:
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    return user if isinstance(user, AuthenticatedUser) else None


def _request_of(ctx: Any) -> Any:
    return getattr(getattr(ctx, "request_context", None), "request", None)


def grant_of_request(request: Any) -> tuple[Path, ...] | None:
    """The workspaces the token behind an HTTP request grants (None: no token, or a token
    valid for every workspace of the server)."""
    user = _user_of_request(request)
    if user is None:
        return None
    granted = (user.access_token.claims or {}).get(GRANT_CLAIM)
    return None if granted is None else tuple(Path(str(p)) for p in granted)


def principal_of_request(request: Any) -> str | None:
    """The authenticated caller's name (token name or OAuth client), for logs and limits."""
    user = _user_of_request(request)
    return user.access_token.client_id if user is not None else None


def grant_for(ctx: Any) -> tuple[Path, ...] | None:
    """:func:`grant_of_request` for an MCP call's context (None on stdio)."""
    return grant_of_request(_request_of(ctx))


def caller_principal(ctx: Any) -> dict[str, Any]:
    """Who makes an MCP call, for the memory layer's authorisation hook: the verified token's
    client over HTTP (``id`` None without authentication), the local OS user on stdio
    (:mod:`server.principals`)."""
    request = _request_of(ctx)
    if request is None:
        return local_principal("stdio")
    user = _user_of_request(request)
    if user is None:
        return token_principal(None)
    return token_principal(user.access_token.client_id, user.access_token.subject)
