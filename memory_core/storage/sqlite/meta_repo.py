"""Store-wide key/value facts on SQLite: the ``meta`` table."""

from __future__ import annotations

from typing import Any

__all__ = ["SqliteMeta"]


class SqliteMeta:
    """:class:`~memory_core.storage.ports.MetaRepository` on one SQLite connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def get(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def all(self) -> dict[str, str]:
        return {
            str(k): str(v)
            for k, v in self._conn.execute("SELECT key, value FROM meta ORDER BY key")
        }

    def bump(self, key: str) -> int:
        self._conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
            (key,),
        )
        return int(self.get(key) or 0)
