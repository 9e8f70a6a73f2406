"""Pick the hierarchy store for a context: the hierarchy on the store's ports, on every backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_core.errors import ConfigError
from memory_core.hierarchy.store import HierarchyStore

if TYPE_CHECKING:
    from memory_core.context import CoreContext

__all__ = ["create_hierarchy_store"]


def create_hierarchy_store(ctx: CoreContext) -> HierarchyStore:
    """The :class:`HierarchyStore` of ``ctx.store`` (SQLite, PostgreSQL or MySQL/MariaDB).

    Raises:
        ConfigError: the store does not implement the ports the hierarchy needs.
    """
    missing = {"items", "vectors", "resources", "categories", "log"} - set(ctx.store.capabilities)
    if missing:
        raise ConfigError(
            f"the {ctx.store.backend} store cannot hold the category hierarchy "
            f"(it lacks the {', '.join(sorted(missing))} port)",
            hint="use a sqlite:///path, postgresql:// or mysql:// URL",
        )
    from memory_core.hierarchy.port_store import PortHierarchyStore

    return PortHierarchyStore(ctx.store, depth=ctx.settings.hierarchy.depth)
