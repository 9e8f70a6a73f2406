"""The MySQL / MariaDB repositories that are the shared server ones in the MySQL dialect, and
the store's key-value ``meta``."""

from __future__ import annotations

from typing import Any

from memory_core.storage.mysql.items import MyItems
from memory_core.storage.server.categories import ServerCategories
from memory_core.storage.server.dialect import MYSQL
from memory_core.storage.server.log_repo import ServerLog
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


class MyMeta:
    """:class:`~memory_core.storage.ports.MetaRepository` on one MySQL / MariaDB connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def get(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE `key` = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta (`key`, value) VALUES (%s, %s) "
            "ON DUPLICATE KEY UPDATE value = VALUES(value)",
            (key, value),
        )

    def all(self) -> dict[str, str]:
        return {
            str(k): str(v)
            for k, v in self._conn.execute("SELECT `key`, value FROM meta ORDER BY `key`")
        }

    def bump(self, key: str) -> int:
        self._conn.execute(
            "INSERT INTO meta (`key`, value) VALUES (%s, '1') "
            "ON DUPLICATE KEY UPDATE value = CAST(value AS UNSIGNED) + 1",
            (key,),
        )
        value = self.get(key)
        assert value is not None
        return int(value)
