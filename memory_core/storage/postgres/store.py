"""The PostgreSQL + pgvector implementation of :class:`memory_core.storage.ports.Store`.

Every port, on the schema of ``migrations/`` (the SQLite schema, table for table): BM25 over
tsvector with term statistics for the lexical arm, pgvector HNSW for the vector arm. Callbacks
run in worker threads on a small pool of blocking connections, one transaction each (see
:mod:`memory_core.storage.postgres.database`). Many processes may share one database: writes
are row-locked and idempotent on natural keys, so nothing is lost or duplicated.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import psycopg
import structlog

from memory_core.config import SearchSettings, StorageSettings
from memory_core.errors import EmbedderMismatchError, MemoirError
from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import DoctorFinding, StoreStats
from memory_core.scope import DEFAULT_SCOPE_SCHEMA, Scope, ScopeSchema
from memory_core.storage.ports import ALL_CAPABILITIES, BackendName, Capability, Tx, VectorHits
from memory_core.storage.postgres.database import PgDatabase, PgVector
from memory_core.storage.postgres.items import bump_vector_generation, lexical_add, vector_dimension
from memory_core.storage.postgres.tx import PgTx
from memory_core.storage.postgres.vectors import PgVectors, create_vector_table
from memory_core.storage.url import DatabaseURL

__all__ = ["PgStore"]

log = structlog.get_logger(__name__)
T = TypeVar("T")
Conn = psycopg.Connection[Any]

EMBEDDER_ID_KEY = "embedder_id"
EMBEDDING_DIM_KEY = "embedding_dim"
_TABLES = ("resource", "item", "category", "entity", "relation", "observation", "event", "run")


def _meta(conn: Conn, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(conn: Conn, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _ensure_vector_index(conn: Conn, embedder_id: str, dimension: int) -> bool:
    # Serialised across processes: two first openers must not both create the table.
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('memoir:item_vec'))")
    stored_id = _meta(conn, EMBEDDER_ID_KEY)
    stored_dim = _meta(conn, EMBEDDING_DIM_KEY)
    if stored_id is None and vector_dimension(conn) is None:
        create_vector_table(conn, dimension)
        _set_meta(conn, EMBEDDER_ID_KEY, embedder_id)
        _set_meta(conn, EMBEDDING_DIM_KEY, str(dimension))
        return True
    if stored_id != embedder_id or (stored_dim and int(stored_dim) != dimension):
        raise EmbedderMismatchError(
            f"this store was built with the embedder {stored_id!r} ({stored_dim} dimensions), "
            f"but memoir is configured with {embedder_id!r} ({dimension} dimensions)",
            hint=f"configure embedding.model = {stored_id!r} again, or re-embed every item with "
            f"`memoir reembed` (uses the configured embedder)",
            details={
                "stored": {"id": stored_id, "dimension": stored_dim},
                "configured": {"id": embedder_id, "dimension": dimension},
            },
        )
    return False


class PgStore:
    """A memoir store in one PostgreSQL database (with the pgvector extension)."""

    def __init__(
        self,
        url: DatabaseURL,
        settings: StorageSettings | None = None,
        *,
        search: SearchSettings | None = None,
        scope_schema: ScopeSchema = DEFAULT_SCOPE_SCHEMA,
        pool_size: int = 4,
    ) -> None:
        del settings, search  # SQLite-only knobs (busy timeout, in-process vector cache)
        self._url = url
        self._scope_schema = scope_schema
        self.db = PgDatabase(url, pool_size=pool_size)
        self._migrations: list[str] = []

    # -- identity --------------------------------------------------------------------------

    @property
    def backend(self) -> BackendName:
        return "postgresql"

    @property
    def url(self) -> DatabaseURL:
        return self._url

    @property
    def scope_schema(self) -> ScopeSchema:
        return self._scope_schema

    @property
    def capabilities(self) -> frozenset[Capability]:
        return ALL_CAPABILITIES

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self, *, create: bool = True) -> PgStore:
        import anyio

        # The database itself exists before memoir (a DBA creates it); its tables are made here.
        self._migrations = await anyio.to_thread.run_sync(lambda: self.db.migrate(create=create))
        return self

    async def close(self) -> None:
        self.db.close_all()

    # -- transactions ----------------------------------------------------------------------

    async def read(self, fn: Callable[[Tx], T]) -> T:
        return await self.db.read(lambda conn: fn(PgTx(conn)))

    async def write(self, fn: Callable[[Tx], T]) -> T:
        return await self.db.write(lambda conn: fn(PgTx(conn)))

    async def ensure_embedder(self, embedder_id: str, dimension: int) -> bool:
        return await self.db.write(lambda conn: _ensure_vector_index(conn, embedder_id, dimension))

    # -- vectors: HNSW in the database, nothing cached in the process ----------------------

    async def vector_search(
        self,
        vector: np.ndarray,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        k: int = 50,
    ) -> VectorHits:
        return await self.read(
            lambda tx: tx.vectors.search(vector, scope, kinds=kinds, where=where, k=k)
        )

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

    async def prepare_vectors(self, scope: Scope | None, kinds: Sequence[ItemKind] = ()) -> bool:
        return False  # the HNSW index is always ready; nothing to build in the process

    # -- maintenance -----------------------------------------------------------------------

    async def stats(self) -> StoreStats:
        def run(conn: Conn) -> StoreStats:
            counts = {}
            for table in _TABLES:
                row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                counts[table] = int(row[0]) if row else 0
            by_kind = {
                str(k): int(n)
                for k, n in conn.execute(
                    "SELECT kind, count(*) FROM item WHERE deleted = 0 GROUP BY kind ORDER BY kind"
                )
            }
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            version = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            migrations = [
                f"{int(r[0]):04d}_{r[1]}"
                for r in conn.execute("SELECT version, name FROM schema_migration ORDER BY 1")
            ]
            dim = _meta(conn, EMBEDDING_DIM_KEY)
            return StoreStats(
                url=self._url.redacted(),
                backend="postgresql",
                file_bytes=int(size[0]) if size else None,
                wal_bytes=None,
                journal_mode=None,
                schema_migrations=migrations,
                counts=counts,
                items_by_kind=by_kind,
                embedder_id=_meta(conn, EMBEDDER_ID_KEY),
                embedding_dim=int(dim) if dim else None,
                vectors=PgVectors(conn).count(),
                sqlite_version=None,
                vec_version=f"pgvector {version[0]}" if version else None,
                driver=f"psycopg {psycopg.__version__}",
                fts5=False,
            )

        return await self.db.read(run)

    async def diagnose(self, *, configured_embedder: str | None) -> list[DoctorFinding]:
        findings: list[DoctorFinding] = []
        try:
            stats = await self.stats()
        except MemoirError as exc:
            return [DoctorFinding("open", "error", exc.message, fix=exc.hint)]
        findings.append(
            DoctorFinding(
                "postgresql",
                "ok",
                f"{self._url.redacted()}: {stats.vec_version}, "
                f"{len(stats.schema_migrations)} migrations",
            )
        )
        if configured_embedder and stats.embedder_id and stats.embedder_id != configured_embedder:
            findings.append(
                DoctorFinding(
                    "embedder",
                    "error",
                    f"the store was built with {stats.embedder_id!r}, "
                    f"memoir is configured with {configured_embedder!r}",
                    fix="configure the store's embedder again, or run `memoir reembed`",
                )
            )
        return findings

    async def reembed(
        self,
        embed: Callable[[list[str]], Awaitable[np.ndarray]],
        embedder_id: str,
        dimension: int,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Recompute every vector with ``embed``, then swap the vector table, rebuild the
        lexical rows and record the embedder in one transaction."""

        def load(conn: Conn) -> list[tuple[int, str, str, str]]:
            return [
                (int(r[0]), str(r[1]), str(r[2]), str(r[3]))
                for r in conn.execute(
                    "SELECT item_id, scope, kind, text FROM item WHERE deleted = 0 ORDER BY item_id"
                )
            ]

        rows = await self.db.read(load)
        vectors: list[np.ndarray] = []
        for start in range(0, len(rows), 256):
            batch = rows[start : start + 256]
            vectors.append(await embed([r[3] for r in batch]))
            if progress:
                progress(min(start + 256, len(rows)), len(rows))
        matrix = np.vstack(vectors) if vectors else np.zeros((0, dimension), dtype=np.float32)

        def swap(conn: Conn) -> int:
            create_vector_table(conn, dimension)
            conn.cursor().executemany(
                "INSERT INTO item_vec (item_id, scope, kind, embedding) VALUES (%s, %s, %s, %s)",
                [(r[0], r[1], r[2], PgVector(v)) for r, v in zip(rows, matrix, strict=True)],
            )
            conn.execute("DELETE FROM item_lexical")
            conn.execute("DELETE FROM lexical_term")
            conn.execute("UPDATE lexical_stats SET rows = 0, tokens = 0")
            all_ids = [int(r[0]) for r in conn.execute("SELECT item_id FROM item")]
            lexical_add(conn, all_ids)
            _set_meta(conn, EMBEDDER_ID_KEY, embedder_id)
            _set_meta(conn, EMBEDDING_DIM_KEY, str(dimension))
            bump_vector_generation(conn, {r[1] for r in rows})
            return len(rows)

        count = await self.db.write(swap)
        log.info("re-embedded store", items=count, embedder=embedder_id, dimension=dimension)
        return count

    async def compact(self) -> dict[str, Any]:
        before = (await self.stats()).file_bytes
        import anyio

        def vacuum() -> None:
            with psycopg.connect(
                self.db.conninfo, autocommit=True, connect_timeout=10
            ) as conn:  # VACUUM cannot run in a transaction
                conn.execute("VACUUM ANALYZE")

        await anyio.to_thread.run_sync(vacuum)
        after = (await self.stats()).file_bytes
        return {"file_bytes_before": before, "file_bytes_after": after}

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
