"""The SQLite implementation of :class:`memory_core.storage.base.Store`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
import structlog

from memory_core.config import StorageSettings
from memory_core.models import DoctorFinding, Item, NewItem, ScoredId, StoreStats
from memory_core.storage.sqlite import items as item_sql
from memory_core.storage.sqlite.database import SqliteDatabase
from memory_core.storage.sqlite.health import collect_stats, diagnose_file
from memory_core.storage.sqlite.meta import (
    EMBEDDER_ID_KEY,
    EMBEDDING_DIM_KEY,
    create_vector_table,
    ensure_vector_index,
    set_meta,
)
from memory_core.storage.url import DatabaseURL

__all__ = ["SqliteStore"]

log = structlog.get_logger(__name__)


class SqliteStore:
    """One SQLite file (or ``:memory:``) holding a whole memoir store."""

    backend = "sqlite"

    def __init__(self, url: DatabaseURL, settings: StorageSettings | None = None) -> None:
        self.url = url
        self.db = SqliteDatabase(url, settings)

    @property
    def path(self) -> Any:
        return self.db.path

    async def open(self, *, create: bool = True) -> SqliteStore:
        await self.db.open(create=create)
        return self

    async def close(self) -> None:
        await self.db.close()

    async def ensure_embedder(self, embedder_id: str, dimension: int) -> bool:
        return await self.db.write(ensure_vector_index, embedder_id, dimension)

    async def add_items(
        self, items: Sequence[NewItem], vectors: np.ndarray | None = None
    ) -> list[int]:
        return await self.db.write(item_sql.insert_items, list(items), vectors)

    async def delete_items(self, item_ids: Sequence[int]) -> int:
        return await self.db.write(item_sql.delete_items, list(item_ids))

    async def get_items(self, item_ids: Sequence[int]) -> dict[int, Item]:
        return await self.db.read(item_sql.get_items, list(item_ids))

    async def lexical_search(
        self, match: str, *, scope: str | None, kinds: Sequence[str] | None = None, limit: int = 50
    ) -> list[ScoredId]:
        def run(conn: Any) -> list[ScoredId]:
            return item_sql.lexical_search(conn, match, scope=scope, kinds=kinds, limit=limit)

        return await self.db.read(run)

    async def vector_search(
        self,
        query: np.ndarray,
        *,
        scope: str | None,
        kinds: Sequence[str] | None = None,
        k: int = 50,
    ) -> list[ScoredId]:
        def run(conn: Any) -> list[ScoredId]:
            return item_sql.vector_search(conn, query, scope=scope, kinds=kinds, k=k)

        return await self.db.read(run)

    async def stats(self) -> StoreStats:
        def run(conn: Any) -> StoreStats:
            return collect_stats(conn, self.db.path, self.url.redacted(), self.db.driver)

        return await self.db.read(run)

    async def diagnose(self, *, configured_embedder: str | None) -> list[DoctorFinding]:
        import anyio

        return await anyio.to_thread.run_sync(
            lambda: diagnose_file(
                self.db.path, self.db.driver, configured_embedder=configured_embedder
            )
        )

    async def reembed(
        self,
        embed: Callable[[list[str]], Awaitable[np.ndarray]],
        embedder_id: str,
        dimension: int,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Recompute every item's vector with ``embed`` and rebuild the FTS and vector indexes.

        Vectors are computed first, outside the write lock; the swap (drop, create, insert,
        record the embedder) is one transaction, so readers see the old index or the new one.
        """

        def load(conn: Any) -> list[tuple[int, str, str, str]]:
            return [row for batch in item_sql.iter_item_texts(conn) for row in batch]

        rows = await self.db.read(load)
        vectors: list[np.ndarray] = []
        for start in range(0, len(rows), 256):
            batch = rows[start : start + 256]
            vectors.append(await embed([r[3] for r in batch]))
            if progress:
                progress(min(start + 256, len(rows)), len(rows))
        matrix = np.vstack(vectors) if vectors else np.zeros((0, dimension), dtype=np.float32)

        def swap(conn: Any) -> int:
            create_vector_table(conn, dimension)
            conn.executemany(
                f"INSERT INTO {item_sql.VEC_TABLE}(item_id, scope, kind, embedding) VALUES (?,?,?,?)",
                [
                    (r[0], r[1], r[2], np.asarray(v, dtype=np.float32).tobytes())
                    for r, v in zip(rows, matrix, strict=True)
                ],
            )
            # Rebuild the lexical rows from the items too: reembed is also the repair command.
            conn.execute("DELETE FROM item_fts")
            conn.execute(
                "INSERT INTO item_fts(rowid, text, tags) "
                "SELECT item_id, text, (SELECT group_concat(value, ' ') FROM json_each(item.tags)) "
                "FROM item"
            )
            set_meta(conn, EMBEDDER_ID_KEY, embedder_id)
            set_meta(conn, EMBEDDING_DIM_KEY, str(dimension))
            return len(rows)

        count = await self.db.write(swap)
        log.info("re-embedded store", items=count, embedder=embedder_id, dimension=dimension)
        return count
