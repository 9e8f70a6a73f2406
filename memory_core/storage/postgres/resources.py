"""Resources on PostgreSQL: the shared server repository in the PostgreSQL dialect."""

from __future__ import annotations

from memory_core.storage.postgres.items import delete_items
from memory_core.storage.server.dialect import POSTGRES
from memory_core.storage.server.resources import ServerResources

__all__ = ["PgResources"]


class PgResources(ServerResources):
    """:class:`~memory_core.storage.ports.ResourceRepository` on one PostgreSQL connection."""

    dialect = POSTGRES

    def _delete_items(self, item_ids: list[int]) -> None:
        delete_items(self._conn, item_ids)

    def _detach(self, resource_ids: list[int]) -> None:
        self._conn.execute(
            "UPDATE entity SET resource_id = NULL WHERE resource_id = ANY(%s)", (resource_ids,)
        )
