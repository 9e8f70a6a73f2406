"""The category tree on PostgreSQL: the shared server repository in the PostgreSQL dialect."""

from __future__ import annotations

from memory_core.storage.server.categories import ServerCategories
from memory_core.storage.server.dialect import POSTGRES

__all__ = ["PgCategories"]


class PgCategories(ServerCategories):
    """:class:`~memory_core.storage.ports.CategoryRepository` on one PostgreSQL connection."""

    dialect = POSTGRES
