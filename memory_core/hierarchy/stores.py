"""Pick the hierarchy store for a context's database URL (SQLite, PostgreSQL, MySQL/MariaDB)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_core.errors import ConfigError
from memory_core.hierarchy.store import HierarchyStore
from memory_core.storage.url import parse_database_url

if TYPE_CHECKING:
    from memory_core.context import CoreContext

__all__ = ["create_hierarchy_store"]


def create_hierarchy_store(ctx: CoreContext) -> HierarchyStore:
    """The :class:`HierarchyStore` for ``ctx.url`` (not yet opened).

    SQLite runs on the shared store (``ctx.store``); PostgreSQL and MySQL/MariaDB get their own
    tables, created on first use, and are imported only when used.

    Raises:
        ConfigError: the URL's backend is unknown, or SQLite without an open shared store.
    """
    url = parse_database_url(ctx.url)
    depth = ctx.settings.hierarchy.depth
    if "categories" in ctx.store.capabilities:
        from memory_core.hierarchy.port_store import PortHierarchyStore

        return PortHierarchyStore(ctx.store, depth=depth)
    # TRANSITIONAL: the hierarchy's own tables on PostgreSQL / MySQL, until those backends
    # implement the ports (then every backend goes through PortHierarchyStore above).
    if url.backend == "postgresql":
        from memory_core.storage.postgres.hierarchy import PostgresHierarchyStore

        return PostgresHierarchyStore(url, depth=depth)  # type: ignore[no-any-return]
    if url.backend == "mysql":
        from memory_core.storage.mysql.hierarchy import MysqlHierarchyStore

        return MysqlHierarchyStore(url, depth=depth)  # type: ignore[no-any-return]
    raise ConfigError(  # pragma: no cover - parse_database_url rejects other schemes
        f"no hierarchy store for {url.redacted()}", hint="use sqlite, postgresql or mysql"
    )
