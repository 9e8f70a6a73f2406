"""The PostgreSQL + pgvector implementation of :class:`memory_core.storage.ports.Store`.

Every port, on the schema of ``migrations/`` (the SQLite schema, table for table): BM25 over
tsvector with term statistics for the lexical arm, pgvector HNSW for the vector arm. Callbacks
run in worker threads on a small pool of blocking connections, one transaction each (see
:mod:`memory_core.storage.postgres.database`). Many processes may share one database: writes
are row-locked and idempotent on natural keys, so nothing is lost or duplicated. What both
server stores share is :class:`~memory_core.storage.server.store.ServerStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psycopg

from memory_core.kinds import ItemKind
from memory_core.scope import Scope
from memory_core.storage.ports import ALL_CAPABILITIES
from memory_core.storage.postgres.database import PgDatabase, PgVector
from memory_core.storage.postgres.items import bump_vector_generation, lexical_add, vector_dimension
from memory_core.storage.postgres.tx import PgTx
from memory_core.storage.postgres.vectors import create_vector_table
from memory_core.storage.server.store import ItemRow, ServerStore
from memory_core.storage.url import DatabaseURL

__all__ = ["PgStore"]

Conn = psycopg.Connection[Any]


class PgStore(ServerStore[PgDatabase]):
    """A memoir store in one PostgreSQL database (with the pgvector extension)."""

    backend_name = "postgresql"
    store_capabilities = ALL_CAPABILITIES
    tables = ("resource", "item", "category", "entity", "relation", "observation", "event", "run")

    def _pool(self, url: DatabaseURL, pool_size: int) -> PgDatabase:
        return PgDatabase(url, pool_size=pool_size)

    def _tx(self, conn: Conn) -> PgTx:
        return PgTx(conn)

    # -- the embedder claim and the vector table -------------------------------------------

    def _lock_embedder(self, conn: Conn) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('memoir:item_vec'))")

    def _vectors_unclaimed(self, conn: Conn, stored_dim: str | None) -> bool:
        return vector_dimension(conn) is None

    def _create_vectors(self, conn: Conn, dimension: int) -> None:
        create_vector_table(conn, dimension)  # vector(n) is typed: the table waits for n

    def _swap_vectors(
        self, conn: Conn, rows: list[ItemRow], matrix: np.ndarray, dimension: int
    ) -> None:
        create_vector_table(conn, dimension)
        conn.cursor().executemany(
            "INSERT INTO item_vec (item_id, scope, kind, embedding) VALUES (%s, %s, %s, %s)",
            [(r[0], r[1], r[2], PgVector(v)) for r, v in zip(rows, matrix, strict=True)],
        )
        conn.execute("DELETE FROM lexical_posting")
        conn.execute("DELETE FROM item_lexical")
        conn.execute("DELETE FROM lexical_term")
        conn.execute("UPDATE lexical_stats SET rows = 0, tokens = 0")
        all_ids = [int(r[0]) for r in conn.execute("SELECT item_id FROM item")]
        lexical_add(conn, all_ids)
        bump_vector_generation(conn, {r[1] for r in rows})

    # -- vectors: HNSW in the database, nothing cached in the process ----------------------

    async def similarities(
        self,
        vector: np.ndarray,
        item_ids: Sequence[int],
        *,
        scope: Scope | None = None,
        kinds: Sequence[ItemKind] = (),
    ) -> dict[int, float]:
        ids = list(dict.fromkeys(int(i) for i in item_ids))
        if not ids:
            return {}

        def run(conn: Conn) -> dict[int, float]:
            dimension = vector_dimension(conn)
            if dimension is None:
                return {}
            rows = conn.execute(
                "SELECT item_id, 1 - (embedding <=> %s) FROM item_vec WHERE item_id = ANY(%s)",
                (PgVector(np.asarray(vector, dtype=np.float32)), ids),
            )
            return {int(r[0]): float(r[1]) for r in rows}

        return await self.db.read(run)

    # -- maintenance -----------------------------------------------------------------------

    def _database_bytes(self, conn: Conn) -> int | None:
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return int(size[0]) if size else None

    def _vec_version(self, conn: Conn) -> str | None:
        version = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
        return f"pgvector {version[0]}" if version else None

    def _driver(self) -> str:
        return f"psycopg {psycopg.__version__}"

    async def _reclaim_space(self) -> None:
        import anyio

        def vacuum() -> None:
            with psycopg.connect(
                self.db.conninfo, autocommit=True, connect_timeout=10
            ) as conn:  # VACUUM cannot run in a transaction
                conn.execute("VACUUM ANALYZE")

        await anyio.to_thread.run_sync(vacuum)

    async def dump(self, scope: Scope | None, sink: Callable[[dict[str, Any]], None]) -> int:
        from memory_core.storage.postgres.dump import dump_rows

        def run(conn: Conn) -> int:
            count = 0
            for record in dump_rows(conn, scope.key if scope is not None else None):
                sink(record)
                count += 1
            return count

        return await self.db.read(run)

    async def restore(self, records: Sequence[dict[str, Any]]) -> dict[str, int]:
        from memory_core.storage.postgres.dump import restore_rows

        batch = list(records)
        return await self.db.write(lambda conn: restore_rows(conn, batch))
