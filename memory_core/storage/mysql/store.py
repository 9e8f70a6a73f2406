"""The MySQL / MariaDB implementation of :class:`memory_core.storage.ports.Store`.

The ports the category hierarchy needs (items, lexical, vectors, resources, categories, runs
and events, meta) on the shared server repositories of :mod:`memory_core.storage.server`; the
graph and tombstones are not implemented here (:attr:`MysqlStore.capabilities` says so, and
asking for them is a ConfigError naming the backends that have them). Vectors are blobs
searched exactly (no vector type before MariaDB 11.7). Callbacks run in worker threads on a
small pool of blocking PyMySQL connections, one transaction each. What both server stores
share is :class:`~memory_core.storage.server.store.ServerStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any, NoReturn

import numpy as np
import pymysql

from memory_core.errors import ConfigError
from memory_core.kinds import ItemKind
from memory_core.scope import Scope
from memory_core.storage.mysql.database import MyConn, MysqlDatabase
from memory_core.storage.mysql.items import MyItems, bump_vector_generation
from memory_core.storage.mysql.lexical import MyLexical
from memory_core.storage.mysql.repos import MyCategories, MyLog, MyMeta, MyResources
from memory_core.storage.mysql.vectors import MyVectors, cosine_top
from memory_core.storage.ports import Capability
from memory_core.storage.server.store import EMBEDDER_ID_KEY, ItemRow, ServerStore
from memory_core.storage.url import DatabaseURL

__all__ = ["MYSQL_CAPABILITIES", "MyTx", "MysqlStore"]

MYSQL_CAPABILITIES: frozenset[Capability] = frozenset(
    ("items", "lexical", "vectors", "resources", "categories", "log")
)


def _missing(port: str) -> NoReturn:
    raise ConfigError(
        f"the MySQL/MariaDB backend does not implement the {port} port "
        "(it serves the category hierarchy: items, search, resources, categories, runs)",
        hint="use a sqlite:///path/to/memoir.db or postgresql://user@host/db URL for documents, "
        "rules and memories",
    )


class MyTx:
    """:class:`~memory_core.storage.ports.Tx` over one MySQL connection in a transaction."""

    def __init__(self, conn: MyConn) -> None:
        self._conn = conn

    @cached_property
    def items(self) -> MyItems:
        return MyItems(self._conn)

    @cached_property
    def lexical(self) -> MyLexical:
        return MyLexical(self._conn)

    @cached_property
    def vectors(self) -> MyVectors:
        return MyVectors(self._conn)

    @cached_property
    def resources(self) -> MyResources:
        return MyResources(self._conn)

    @cached_property
    def categories(self) -> MyCategories:
        return MyCategories(self._conn)

    @cached_property
    def log(self) -> MyLog:
        return MyLog(self._conn)

    @cached_property
    def meta(self) -> MyMeta:
        return MyMeta(self._conn)

    @property
    def graph(self) -> Any:
        _missing("graph")

    @property
    def tombstones(self) -> Any:
        _missing("tombstones")


class MysqlStore(ServerStore[MysqlDatabase]):
    """A memoir store in one MySQL / MariaDB database (the hierarchy's ports)."""

    backend_name = "mysql"
    store_capabilities = MYSQL_CAPABILITIES
    tables = ("resource", "item", "category", "event", "run")

    def _pool(self, url: DatabaseURL, pool_size: int) -> MysqlDatabase:
        return MysqlDatabase(url, pool_size=pool_size)

    def _tx(self, conn: MyConn) -> MyTx:
        return MyTx(conn)

    # -- the embedder claim and the vector rows --------------------------------------------

    def _lock_embedder(self, conn: MyConn) -> None:
        conn.execute("SELECT `key` FROM meta WHERE `key` = %s FOR UPDATE", (EMBEDDER_ID_KEY,))

    def _vectors_unclaimed(self, conn: MyConn, stored_dim: str | None) -> bool:
        return stored_dim is None  # blobs need no table per dimension

    def _swap_vectors(
        self, conn: MyConn, rows: list[ItemRow], matrix: np.ndarray, dimension: int
    ) -> None:
        conn.execute("DELETE FROM item_vec")
        items = MyItems(conn)
        items._insert_vectors(
            [
                (r[0], r[1], r[2], items.vector_value(v, dimension))
                for r, v in zip(rows, matrix, strict=True)
            ]
        )
        bump_vector_generation(conn, {r[1] for r in rows})

    # -- vectors: exact search in the database ---------------------------------------------

    async def similarities(
        self,
        vector: np.ndarray,
        item_ids: Sequence[int],
        *,
        scope: Scope | None = None,
        kinds: Sequence[ItemKind] = (),
    ) -> dict[int, float]:
        found = await self.read(lambda tx: tx.vectors.vectors(item_ids))
        if not found:
            return {}
        ids = np.fromiter(found, dtype=np.int64, count=len(found))
        matrix = np.vstack([found[int(i)] for i in ids])
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        return {h.item_id: h.score for h in cosine_top(query, ids, matrix, len(ids))}

    # -- maintenance -----------------------------------------------------------------------

    def _database_bytes(self, conn: MyConn) -> int | None:
        size = conn.execute(
            "SELECT coalesce(sum(data_length + index_length), 0) FROM information_schema.tables "
            "WHERE table_schema = DATABASE()"
        ).fetchone()
        return int(size[0]) if size else None

    def _vec_version(self, conn: MyConn) -> str | None:
        return f"exact float32 blobs ({self.db.server_version})"

    def _driver(self) -> str:
        return f"PyMySQL {pymysql.__version__}"

    async def _reclaim_space(self) -> None:
        def optimize(conn: MyConn) -> None:
            for table in ("item", "item_term", "item_vec", "resource"):
                conn.execute(f"OPTIMIZE TABLE {table}").fetchall()

        await self.db.read(optimize)

    async def dump(self, scope: Scope | None, sink: Callable[[dict[str, Any]], None]) -> int:
        raise ConfigError(
            f"backups of MySQL/MariaDB stores are not implemented ({self._url.redacted()})",
            hint="export from a sqlite:///path or postgresql:// store",
        )

    async def restore(self, records: Sequence[dict[str, Any]]) -> dict[str, int]:
        raise ConfigError(
            f"restoring into MySQL/MariaDB stores is not implemented ({self._url.redacted()})",
            hint="import into a sqlite:///path or postgresql:// store",
        )
