"""Resource change notifications after a write (rules upserted → the rule resources changed).

Handshake-era sessions get ``notifications/resources/list_changed`` and, for the URIs they
subscribed to, ``notifications/resources/updated``; 2026-07-28 sessions get the same events on
their ``subscriptions/listen`` stream through the SDK's subscription bus.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import structlog
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams
from mcp_types.version import is_version_at_least

from server.mcp_app.calls import connection_of

__all__ = [
    "CATEGORIES_URI",
    "RULES_INDEX_URI",
    "STORE_SUMMARY_URI",
    "ResourceSubscriptions",
    "announce_rules_changed",
    "rule_uri",
    "subscriptions",
]

log = structlog.get_logger(__name__)

RULES_INDEX_URI = "memoir://rules"
STORE_SUMMARY_URI = "memoir://store/summary"
CATEGORIES_URI = "memoir://categories"
_MODERN = "2026-07-28"


def rule_uri(rule_id: str) -> str:
    return f"{RULES_INDEX_URI}/{rule_id}"


class ResourceSubscriptions:
    """Which URIs each handshake-era session subscribed to (``resources/subscribe``)."""

    def __init__(self) -> None:
        self._by_session: dict[int, set[str]] = {}

    def add(self, session: object, uri: str) -> None:
        self._by_session.setdefault(id(connection_of(session)), set()).add(uri)

    def remove(self, session: object, uri: str) -> None:
        self._by_session.get(id(connection_of(session)), set()).discard(uri)

    def of(self, session: object) -> set[str]:
        return set(self._by_session.get(id(connection_of(session)), ()))

    async def on_subscribe(self, ctx: object, params: SubscribeRequestParams) -> EmptyResult:
        self.add(ctx.session, params.uri)  # type: ignore[attr-defined]
        return EmptyResult()

    async def on_unsubscribe(self, ctx: object, params: UnsubscribeRequestParams) -> EmptyResult:
        self.remove(ctx.session, params.uri)  # type: ignore[attr-defined]
        return EmptyResult()


# Keyed by session identity, so one registry serves every server built in this process.
subscriptions = ResourceSubscriptions()


async def announce_rules_changed(ctx: Context, rule_ids: Sequence[str]) -> None:
    """Tell the client the rule resources changed. A notification that cannot be delivered
    (client gone, transport closed) never fails the write that caused it."""
    changed = {RULES_INDEX_URI, STORE_SUMMARY_URI, *(rule_uri(r) for r in rule_ids)}
    try:
        version = ctx.protocol_version
        if version is not None and is_version_at_least(version, _MODERN):
            await ctx.notify_resources_changed()
            for uri in sorted(changed):
                await ctx.notify_resource_updated(uri)
            return
        session = ctx.session
        await session.send_resource_list_changed()
        for uri in sorted(changed & subscriptions.of(session)):
            await session.send_resource_updated(uri)
    except (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError, ValueError) as exc:
        log.info("resource notification not delivered", error=type(exc).__name__)
