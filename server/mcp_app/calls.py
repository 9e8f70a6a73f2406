"""What every tool call shares: who the client is, its scope from MCP roots, the error edge.

Model-fixable failures (a ``MemoirError``: empty graph, bad path, rate limit, broken store) become
``isError`` results whose text carries the message and the hint, plus the error object as
``structuredContent``. Protocol problems (unknown tool, arguments that do not match the schema)
stay with the SDK, which answers them as protocol / validation errors. Nothing here returns an
error string dressed as success.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import ListRoots
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import CallToolResult, ListRootsResult, TextContent
from pydantic import BaseModel

from memory_core.errors import MemoirError
from server.mcp_app.scoping import ScopeDecision, ScopeDefaults, decide_scope

__all__ = [
    "RootsCache",
    "client_key",
    "client_roots",
    "connection_of",
    "error_result",
    "ok_result",
    "root_uris",
    "roots_for_request",
    "scope_for",
]

log = structlog.get_logger(__name__)


def client_roots(ctx: Context) -> ListRoots | ListRootsResult | None:
    """Resolver: the client's roots when it declared the capability, else nothing.

    Answered from the server's :class:`RootsCache` when the connection's roots are known;
    otherwise the SDK sends ``roots/list`` (handshake-era sessions) or batches it into an
    ``InputRequiredResult`` (2026-07-28 sessions) and injects the ``ListRootsResult``.
    """
    caps = ctx.client_capabilities
    if caps is None or caps.roots is None:
        return None
    cache = getattr(ctx.mcp_server, "roots_cache", None)
    cached = cache.get(ctx.session) if isinstance(cache, RootsCache) else None
    return cached if cached is not None else ListRoots()


class RootsCache:
    """Each connection's roots, kept while the client promises to announce changes.

    Only clients that declared ``roots.listChanged`` are cached (the others are asked on
    every call); ``notifications/roots/list_changed`` drops the entry. Keyed weakly by the
    connection object, so a closed connection's entry goes with it and a new connection can
    never inherit another client's roots.
    """

    def __init__(self) -> None:
        self._by_connection: weakref.WeakKeyDictionary[Any, ListRootsResult] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, session: object) -> ListRootsResult | None:
        try:
            return self._by_connection.get(connection_of(session))
        except TypeError:  # not weak-referenceable: never cached
            return None

    def remember(self, ctx: Context, roots: ListRootsResult | None) -> None:
        caps = ctx.client_capabilities
        if roots is None or caps is None or caps.roots is None or not caps.roots.list_changed:
            return
        with contextlib.suppress(TypeError):
            self._by_connection[connection_of(ctx.session)] = roots

    def forget(self, session: object) -> None:
        with contextlib.suppress(TypeError):
            self._by_connection.pop(connection_of(session), None)

    async def on_list_changed(self, ctx: Any, _params: Any) -> None:
        """Handler of ``notifications/roots/list_changed``."""
        self.forget(ctx.session)


def root_uris(roots: ListRootsResult | None) -> list[str]:
    return [str(root.uri) for root in roots.roots] if roots is not None else []


async def roots_for_request(ctx: Context) -> list[str]:
    """Roots for handlers that cannot use a resolver (resources, prompts): handshake-era
    sessions only, where the server may send ``roots/list`` mid-request."""
    caps = ctx.client_capabilities
    session = ctx.session
    if caps is None or caps.roots is None:
        return []
    cache = getattr(ctx.mcp_server, "roots_cache", None)
    cached = cache.get(session) if isinstance(cache, RootsCache) else None
    if cached is not None:
        return root_uris(cached)
    if not session.can_send_request:
        return []
    try:
        with warnings.catch_warnings():
            # Deprecated from protocol 2026-07-28 on; still what handshake-era clients offer.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            result = await session.list_roots()
    except (MCPError, TimeoutError) as exc:  # a client that fails roots/list only loses its scope
        log.info("roots/list failed; using the server's default scope", error=type(exc).__name__)
        return []
    if isinstance(cache, RootsCache):
        cache.remember(ctx, result)
    return root_uris(result)


def scope_for(
    uris: Sequence[str], defaults: ScopeDefaults, *, grant: Sequence[Path] | None = None
) -> ScopeDecision:
    """The server's scope decision for a caller with these roots and credentials."""
    return decide_scope(uris, defaults, grant=grant)


def client_key(ctx: Context) -> str:
    """Who is calling, for the per-client rate limit: the HTTP session id when there is one,
    else the MCP session object (one per stdio process or SSE connection)."""
    headers = ctx.headers
    if headers is not None:
        session_id = headers.get("mcp-session-id")
        if session_id:
            return f"http:{session_id}"
    return f"connection:{id(connection_of(ctx.session))}"


def connection_of(session: object) -> object:
    """The connection behind a request's session. The SDK builds a fresh ``ServerSession`` per
    request; the ``Connection`` it wraps lives as long as the client (stdio process, SSE
    stream, HTTP session), so it is what identifies a client."""
    return getattr(session, "_connection", session)


def ok_result(out: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=out.model_dump(mode="json"),
    )


def error_result(error: MemoirError, *, tool: str) -> CallToolResult:
    """A tool error the model can act on: message first (the spec's wording where it has one),
    then the hint."""
    text = error.message if not error.hint else f"{error.message}\nHint: {error.hint}"
    log.info("tool error", tool=tool, code=error.code)
    payload: dict[str, Any] = {"error": error.to_dict()}
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=payload,
        is_error=True,
    )
