"""The MySQL / MariaDB repositories that are the shared server ones in the MySQL dialect."""

from __future__ import annotations

from memory_core.storage.mysql.items import MyItems
from memory_core.storage.server.categories import ServerCategories
from memory_core.storage.server.dialect import MYSQL
from memory_core.storage.server.log_repo import ServerLog, ServerMeta
from memory_core.storage.server.resources import ServerResources

__all__ = ["MyCategories", "MyLog", "MyMeta", "MyResources"]


class MyCategories(ServerCategories):
    dialect = MYSQL


class MyResources(ServerResources):
    dialect = MYSQL

    def _delete_items(self, item_ids: list[int]) -> None:
        MyItems(self._conn).delete(item_ids)


class MyLog(ServerLog):
    dialect = MYSQL


class MyMeta(ServerMeta):
    """:class:`~memory_core.storage.ports.MetaRepository` on one MySQL / MariaDB connection."""

    dialect = MYSQL
