"""The shared half of the two server stores (PostgreSQL, MySQL/MariaDB).

:class:`ServerStore` is the :class:`~memory_core.storage.ports.Store` composition both server
backends have in common: a :class:`~memory_core.storage.server.pool.ServerPool` of blocking
connections, one transaction per callback seen through the backend's ``Tx``, migrations on
open, the embedder claim recorded in ``meta``, statistics, diagnosis and re-embedding. A
backend names its pool and ``Tx`` and supplies what its database does its own way (how the
embedder claim is serialised, where vectors live, how space is measured and reclaimed).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Generic, Self, TypeVar

import numpy as np
import structlog

from memory_core.config import SearchSettings, StorageSettings
from memory_core.errors import EmbedderMismatchError, MemoirError
from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import DoctorFinding, StoreStats, embedding_text
from memory_core.scope import DEFAULT_SCOPE_SCHEMA, Scope, ScopeSchema
from memory_core.storage.ports import BackendName, Capability, Tx, VectorHits
from memory_core.storage.server.pool import ServerPool
from memory_core.storage.url import DatabaseURL

__all__ = ["EMBEDDER_ID_KEY", "EMBEDDING_DIM_KEY", "ItemRow", "ServerStore"]

log = structlog.get_logger(__name__)
T = TypeVar("T")
P = TypeVar("P", bound=ServerPool[Any])

EMBEDDER_ID_KEY = "embedder_id"
EMBEDDING_DIM_KEY = "embedding_dim"
_REEMBED_BATCH = 256

ItemRow = tuple[int, str, str, str]
"""A live item to re-embed: (item id, scope key, kind, text to embed)."""


def _metadata(value: Any) -> dict[str, Any] | None:
    """An item's metadata column as read: JSON text (or a decoded dict where a driver does so)."""
    if isinstance(value, dict):
        return value
    return json.loads(value) if value else None


class ServerStore(Generic[P]):
    """A memoir store in one server database; a backend subclass fills in the hooks below."""

    backend_name: ClassVar[BackendName]
    store_capabilities: ClassVar[frozenset[Capability]]
    tables: ClassVar[tuple[str, ...]]
    """The tables :meth:`stats` counts rows of."""

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
        self.db: P = self._pool(url, pool_size)
        self._migrations: list[str] = []

    # -- what a backend supplies -----------------------------------------------------------

    def _pool(self, url: DatabaseURL, pool_size: int) -> P:
        raise NotImplementedError

    def _tx(self, conn: Any) -> Tx:
        raise NotImplementedError

    def _lock_embedder(self, conn: Any) -> None:
        """Serialise the embedder claim across processes (two first openers must not both
        claim it)."""
        raise NotImplementedError

    def _vectors_unclaimed(self, conn: Any, stored_dim: str | None) -> bool:
        """No embedder has written vectors yet (``meta`` holds no embedder id)."""
        raise NotImplementedError

    def _create_vectors(self, conn: Any, dimension: int) -> None:
        """Make the store hold vectors of ``dimension`` (nothing where the schema already does)."""

    def _swap_vectors(
        self, conn: Any, rows: list[ItemRow], matrix: np.ndarray, dimension: int
    ) -> None:
        """Replace every stored vector by ``matrix`` (one row per item of ``rows``), in the
        transaction that records the new embedder in ``meta``."""
        raise NotImplementedError

    def _database_bytes(self, conn: Any) -> int | None:
        raise NotImplementedError

    def _vec_version(self, conn: Any) -> str | None:
        raise NotImplementedError

    def _driver(self) -> str:
        raise NotImplementedError

    async def _reclaim_space(self) -> None:
        raise NotImplementedError

    # -- identity --------------------------------------------------------------------------

    @property
    def backend(self) -> BackendName:
        return self.backend_name

    @property
    def url(self) -> DatabaseURL:
        return self._url

    @property
    def scope_schema(self) -> ScopeSchema:
        return self._scope_schema

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.store_capabilities

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self, *, create: bool = True) -> Self:
        import anyio

        # The database itself exists before memoir (a DBA creates it); its tables are made here.
        self._migrations = await anyio.to_thread.run_sync(lambda: self.db.migrate(create=create))
        return self

    async def close(self) -> None:
        self.db.close_all()

    # -- transactions ----------------------------------------------------------------------

    async def read(self, fn: Callable[[Tx], T]) -> T:
        return await self.db.read(lambda conn: fn(self._tx(conn)))

    async def write(self, fn: Callable[[Tx], T]) -> T:
        return await self.db.write(lambda conn: fn(self._tx(conn)))

    async def ensure_embedder(self, embedder_id: str, dimension: int) -> bool:
        return await self.db.write(lambda conn: self.claim_embedder(conn, embedder_id, dimension))

    def claim_embedder(self, conn: Any, embedder_id: str, dimension: int) -> bool:
        """:meth:`ensure_embedder` inside a transaction the caller holds on ``conn``.

        Raises:
            EmbedderMismatchError: the store records another embedder or dimension.
        """
        self._lock_embedder(conn)
        meta = self._tx(conn).meta
        stored_id, stored_dim = meta.get(EMBEDDER_ID_KEY), meta.get(EMBEDDING_DIM_KEY)
        if stored_id is None and self._vectors_unclaimed(conn, stored_dim):
            self._create_vectors(conn, dimension)
            meta.set(EMBEDDER_ID_KEY, embedder_id)
            meta.set(EMBEDDING_DIM_KEY, str(dimension))
            return True
        if stored_id != embedder_id or (stored_dim and int(stored_dim) != dimension):
            raise EmbedderMismatchError(
                f"this store was built with the embedder {stored_id!r} ({stored_dim} dimensions), "
                f"but memoir is configured with {embedder_id!r} ({dimension} dimensions)",
                hint=f"configure embedding.model = {stored_id!r} again, or re-embed every item "
                f"with `memoir reembed` (uses the configured embedder)",
                details={
                    "stored": {"id": stored_id, "dimension": stored_dim},
                    "configured": {"id": embedder_id, "dimension": dimension},
                },
            )
        return False

    # -- vectors: searched in the database, nothing cached in the process ------------------

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

    async def prepare_vectors(self, scope: Scope | None, kinds: Sequence[ItemKind] = ()) -> bool:
        return False  # the database searches its own vectors; nothing to build in the process

    # -- maintenance -----------------------------------------------------------------------

    async def stats(self) -> StoreStats:
        def run(conn: Any) -> StoreStats:
            counts = {}
            for table in self.tables:
                row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                counts[table] = int(row[0]) if row else 0
            by_kind = {
                str(k): int(n)
                for k, n in conn.execute(
                    "SELECT kind, count(*) FROM item WHERE deleted = 0 GROUP BY kind ORDER BY kind"
                )
            }
            migrations = [
                f"{int(r[0]):04d}_{r[1]}"
                for r in conn.execute("SELECT version, name FROM schema_migration ORDER BY 1")
            ]
            tx = self._tx(conn)
            dim = tx.meta.get(EMBEDDING_DIM_KEY)
            return StoreStats(
                url=self._url.redacted(),
                backend=self.backend_name,
                file_bytes=self._database_bytes(conn),
                wal_bytes=None,
                journal_mode=None,
                schema_migrations=migrations,
                counts=counts,
                items_by_kind=by_kind,
                embedder_id=tx.meta.get(EMBEDDER_ID_KEY),
                embedding_dim=int(dim) if dim else None,
                vectors=tx.vectors.count(),
                sqlite_version=None,
                vec_version=self._vec_version(conn),
                driver=self._driver(),
                fts5=False,
            )

        return await self.db.read(run)

    async def diagnose(self, *, configured_embedder: str | None) -> list[DoctorFinding]:
        try:
            stats = await self.stats()
        except MemoirError as exc:
            return [DoctorFinding("open", "error", exc.message, fix=exc.hint)]
        findings = [
            DoctorFinding(
                self.backend_name,
                "ok",
                f"{self._url.redacted()}: {stats.vec_version}, "
                f"{len(stats.schema_migrations)} migrations",
            )
        ]
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
        """Recompute every vector with ``embed``, then replace the stored vectors and record
        the embedder in one transaction."""

        def load(conn: Any) -> list[ItemRow]:
            return [
                (int(r[0]), str(r[1]), str(r[2]), embedding_text(str(r[3]), _metadata(r[4])))
                for r in conn.execute(
                    "SELECT item_id, scope, kind, text, metadata FROM item "
                    "WHERE deleted = 0 ORDER BY item_id"
                )
            ]

        rows = await self.db.read(load)
        vectors: list[np.ndarray] = []
        for start in range(0, len(rows), _REEMBED_BATCH):
            batch = rows[start : start + _REEMBED_BATCH]
            vectors.append(await embed([r[3] for r in batch]))
            if progress:
                progress(min(start + _REEMBED_BATCH, len(rows)), len(rows))
        matrix = np.vstack(vectors) if vectors else np.zeros((0, dimension), dtype=np.float32)

        def swap(conn: Any) -> int:
            # The new dimension first: a backend's vector writes may check against it.
            meta = self._tx(conn).meta
            meta.set(EMBEDDER_ID_KEY, embedder_id)
            meta.set(EMBEDDING_DIM_KEY, str(dimension))
            self._swap_vectors(conn, rows, matrix, dimension)
            return len(rows)

        count = await self.db.write(swap)
        log.info("re-embedded store", items=count, embedder=embedder_id, dimension=dimension)
        return count

    async def compact(self) -> dict[str, Any]:
        before = (await self.stats()).file_bytes
        await self._reclaim_space()
        after = (await self.stats()).file_bytes
        return {"file_bytes_before": before, "file_bytes_after": after}
