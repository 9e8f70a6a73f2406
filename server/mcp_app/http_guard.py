"""The checks in front of every HTTP route: bind policy, Host / Origin, body size, credentials.

:func:`guard_app` wraps the whole Starlette application (MCP endpoints, ``/healthz``, the REST
routes), outermost first:

1. :class:`HostOriginGuard`: the ``Host`` header must name this server (DNS rebinding) and a
   browser ``Origin``, when present, must be allowed: 421 / 403 otherwise, on every address
   (the SDK only checks on loopback);
2. :class:`BodyLimit`: a request body over ``limits.request_bytes`` is refused with 413 and a
   JSON-RPC error naming the limit and the setting (the MCP client shows it as the call's error);
3. the SDK's ``AuthenticationMiddleware`` + ``BearerAuthBackend`` (who is calling) and its
   ``RequireAuthMiddleware`` on every path but the public ones (``/healthz``, the OAuth
   Protected Resource Metadata), when credentials are configured.

:func:`check_bind` refuses to serve a non-loopback address without credentials unless
``--allow-unauthenticated-network`` says the risk is understood.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_core.config import Settings
from memory_core.errors import ConfigError

__all__ = [
    "PUBLIC_PATHS",
    "BodyLimit",
    "HostOriginGuard",
    "HostPolicy",
    "check_bind",
    "guard_app",
    "host_policy",
    "is_loopback",
]

log = structlog.get_logger(__name__)

# ``/memory`` is the memory web page: static HTML holding no data (its calls to ``/v1/memory``
# carry the token the user types in), so a browser can load it before it has one.
PUBLIC_PATHS = ("/healthz", "/.well-known/oauth-protected-resource", "/memory")
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_WILDCARDS = ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> tuple[str, str | None]:
    """``name[:port]`` / ``[v6][:port]`` → (name, port)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name, rest[1:] if rest.startswith(":") else None
    if value.count(":") == 1:
        name, port = value.split(":")
        return name, port
    return value, None


@dataclass(frozen=True)
class HostPolicy:
    """Allowed ``Host`` names (each ``name`` or ``name:port``; a bare name or ``name:*``
    allows any port) and allowed browser origins (``scheme://name[:port|:*]``)."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    def host_allowed(self, header: str | None) -> bool:
        if not header:
            return False
        name, port = _split_host(header)
        for entry in self.hosts:
            allowed_name, allowed_port = _split_host(entry)
            if allowed_name == name and allowed_port in (None, "*", port):
                return True
        return False

    def origin_allowed(self, origin: str | None) -> bool:
        if not origin:  # not a browser, or a same-origin request
            return True
        scheme, _, rest = origin.strip().lower().partition("://")
        if scheme not in ("http", "https") or not rest:
            return False
        name, port = _split_host(rest.rstrip("/"))
        for entry in self.origins:
            allowed_scheme, _, allowed_rest = entry.lower().partition("://")
            allowed_name, allowed_port = _split_host(allowed_rest.rstrip("/"))
            if allowed_scheme == scheme and allowed_name == name and allowed_port in ("*", port):
                return True
        return False


def _machine_names() -> list[str]:
    names = [socket.gethostname(), socket.getfqdn()]
    with contextlib.suppress(OSError):
        names += socket.gethostbyname_ex(socket.gethostname())[2]
    return [n for n in names if n]


def host_policy(
    host: str, *, allowed_hosts: Sequence[str], allowed_origins: Sequence[str]
) -> HostPolicy:
    """The policy for a server bound to ``host``: loopback names, the bound address (for a
    wildcard bind: this machine's names and addresses), and the configured extras."""
    names: list[str] = list(_LOOPBACK_NAMES)
    if host in _WILDCARDS:
        names += _machine_names()
    elif not is_loopback(host):
        names.append(host)
    names = list(dict.fromkeys(n.lower() for n in names))
    hosts = tuple(dict.fromkeys([*(f"[{n}]" if ":" in n else n for n in names), *allowed_hosts]))
    origins = [
        f"{scheme}://{f'[{n}]' if ':' in n else n}:*" for n in names for scheme in ("http", "https")
    ]
    origins += [
        f"{scheme}://{f'[{n}]' if ':' in n else n}" for n in names for scheme in ("http", "https")
    ]
    return HostPolicy(hosts, tuple(dict.fromkeys([*origins, *allowed_origins])))


async def _send_json(
    send: Send, status: int, body: dict[str, Any], headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class HostOriginGuard:
    """421 for a ``Host`` that does not name this server, 403 for a foreign browser origin."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.policy.host_allowed(host):
            log.warning("request refused: Host not allowed", host=(host or "")[:100])
            await _send_json(
                send,
                421,
                {
                    "error": "misdirected_request",
                    "error_description": "this Host is not served here; add it to "
                    "server.allowed_hosts if it is this server's name",
                },
            )
            return
        origin = headers.get("origin")
        if not self.policy.origin_allowed(origin):
            log.warning("request refused: Origin not allowed", origin=(origin or "")[:100])
            await _send_json(
                send,
                403,
                {
                    "error": "forbidden_origin",
                    "error_description": "browser requests from this Origin are refused; add it "
                    "to server.allowed_origins to allow it",
                },
            )
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with a JSON-RPC error the client can show."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _refusal(self, size: int | None) -> dict[str, Any]:
        told = f"of {size} bytes " if size is not None else ""
        return {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": f"request body {told}exceeds the limit of {self.limit} bytes "
                "(limits.request_bytes): send less text per call (split it), or raise "
                "limits.request_bytes (MEMOIR_LIMITS__REQUEST_BYTES) on the server",
                "data": {"limit": self.limit, "setting": "limits.request_bytes"},
            },
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _send_json(send, 413, self._refusal(int(declared)))
            return
        received = 0
        queued: list[Message] = []
        while True:  # read the body up front (bounded): a streaming sender cannot exceed it
            message = await receive()
            queued.append(message)
            if message["type"] != "http.request":
                break
            received += len(message.get("body", b""))
            if received > self.limit:
                await _send_json(send, 413, self._refusal(None))
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return queued.pop(0) if queued else await receive()

        await self.app(scope, replay, send)


class _RequireAuthExceptPublic:
    def __init__(self, app: ASGIApp, guarded: ASGIApp) -> None:
        self.app = app
        self.guarded = guarded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope["type"] == "http" and not path.startswith(PUBLIC_PATHS):
            await self.guarded(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def guard_app(
    app: ASGIApp, settings: Settings, *, host: str, verifier: Any, resource_metadata_url: Any = None
) -> ASGIApp:
    """``app`` behind the host / origin, size and credential checks."""
    from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
    from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
    from starlette.middleware.authentication import AuthenticationMiddleware

    wrapped: ASGIApp = app
    if verifier is not None:
        oauth = settings.server.auth.oauth
        scopes = list(oauth.required_scopes) if oauth is not None else []
        required = RequireAuthMiddleware(AuthContextMiddleware(app), scopes, resource_metadata_url)
        wrapped = AuthenticationMiddleware(
            _RequireAuthExceptPublic(AuthContextMiddleware(app), required),
            backend=BearerAuthBackend(
                verifier,
                resource_server_url=_resource_url(oauth.resource_url)
                if oauth is not None
                else None,
            ),
        )
    wrapped = BodyLimit(wrapped, settings.limits.request_bytes)
    policy = host_policy(
        host,
        allowed_hosts=settings.server.allowed_hosts,
        allowed_origins=settings.server.allowed_origins,
    )
    return HostOriginGuard(wrapped, policy)


def _resource_url(value: str) -> Any:
    from pydantic import AnyHttpUrl

    return AnyHttpUrl(value)


def check_bind(settings: Settings, host: str, *, has_credentials: bool) -> None:
    """Refuse a non-loopback address without credentials (unless explicitly allowed).

    Raises:
        ConfigError: ``host`` is reachable from other machines and nobody must authenticate.
    """
    if is_loopback(host) or has_credentials:
        return
    if settings.server.allow_unauthenticated_network:
        log.warning(
            "serving a network address WITHOUT authentication: anyone who reaches it can read "
            "and change this store",
            host=host,
        )
        return
    raise ConfigError(
        f"refusing to serve {host or 'every address'} without authentication: anyone who can "
        "reach it could read and change this store",
        hint="create a token with `memoir token new NAME` and add it to memoir.toml "
        "([[server.auth.tokens]]), or configure [server.auth.oauth]; or bind 127.0.0.1; or, "
        "behind a firewall you trust, pass --allow-unauthenticated-network",
    )
