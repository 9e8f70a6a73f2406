"""The SQLite implementation of :class:`memory_core.storage.ports.Store`: one file, every port."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import numpy as np
import structlog

from memory_core.config import SearchSettings, StorageSettings
from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import DoctorFinding, StoreHealth, StoreStats
from memory_core.scope import DEFAULT_SCOPE_SCHEMA, Scope, ScopeSchema
from memory_core.storage.ports import ALL_CAPABILITIES, BackendName, Capability, Tx, VectorHits
from memory_core.storage.sqlite import items as item_sql
from memory_core.storage.sqlite.consistency import consistency_findings
from memory_core.storage.sqlite.database import SqliteDatabase
from memory_core.storage.sqlite.driver import load_vec_extension
from memory_core.storage.sqlite.dump import decode_embedding, dump_rows, restore_rows
from memory_core.storage.sqlite.health import collect_stats, diagnose_file
from memory_core.storage.sqlite.meta import (
    EMBEDDER_ID_KEY,
    EMBEDDING_DIM_KEY,
    create_vector_table,
    ensure_vector_index,
    set_meta,
)
from memory_core.storage.sqlite.tx import SqliteTx
from memory_core.storage.sqlite.vector_cache import (
    CachedVectors,
    CacheKey,
    VectorCache,
    load_entry,
    similarities_from,
    top_k,
)
from memory_core.storage.sqlite.vectors import SqliteVectors, matching_item_ids, vector_stamp
from memory_core.storage.url import DatabaseURL

__all__ = ["SqliteStore"]

log = structlog.get_logger(__name__)

T = TypeVar("T")


def _in_snapshot(conn: Any, fn: Callable[[Tx], T]) -> T:
    # One read transaction, so every statement of ``fn`` sees the same snapshot (WAL).
    conn.execute("BEGIN")
    try:
        return fn(SqliteTx(conn))
    finally:
        conn.execute("COMMIT")


def _cache_key(scope: Scope | None, kinds: Sequence[str]) -> CacheKey:
    return (scope.key if scope is not None else None, tuple(sorted(kinds)))


class SqliteStore:
    """One SQLite file (or ``:memory:``) holding a whole memoir store."""

    def __init__(
        self,
        url: DatabaseURL,
        settings: StorageSettings | None = None,
        *,
        search: SearchSettings | None = None,
        scope_schema: ScopeSchema = DEFAULT_SCOPE_SCHEMA,
    ) -> None:
        self._url = url
        self.db = SqliteDatabase(url, settings)
        self._scope_schema = scope_schema
        search = search or SearchSettings()
        self._cache = (
            VectorCache(
                min_items=search.vector_cache_min_items, max_items=search.vector_cache_max_items
            )
            if search.vector_cache
            else None
        )
        self._sizes: dict[str, int] = {}

    # -- identity --------------------------------------------------------------------------

    @property
    def backend(self) -> BackendName:
        return "sqlite"

    @property
    def url(self) -> DatabaseURL:
        return self._url

    @property
    def scope_schema(self) -> ScopeSchema:
        return self._scope_schema

    @property
    def capabilities(self) -> frozenset[Capability]:
        return ALL_CAPABILITIES

    @property
    def path(self) -> Path | None:
        return self.db.path

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self, *, create: bool = True) -> SqliteStore:
        await self.db.open(create=create)
        return self

    async def close(self) -> None:
        await self.db.close()
        if self._cache is not None:
            self._cache.drop()  # the matrices of a closed store are never read again

    async def health(self) -> StoreHealth:
        """Is the open file still the store's, and did its last quick check pass."""
        return await self.db.health()

    # -- transactions ----------------------------------------------------------------------

    async def read(self, fn: Callable[[Tx], T]) -> T:
        return await self.db.read(_in_snapshot, fn)

    async def write(self, fn: Callable[[Tx], T]) -> T:
        return await self.db.write(lambda conn: fn(SqliteTx(conn)))

    async def ensure_embedder(self, embedder_id: str, dimension: int) -> bool:
        return await self.db.write(ensure_vector_index, embedder_id, dimension)

    # -- vectors, with the in-process matrix when it is fresh --------------------------------

    async def _cached(self, scope: Scope | None, kinds: Sequence[str]) -> CachedVectors | None:
        if self._cache is None:
            return None
        key = _cache_key(scope, kinds)
        stamp = await self.db.read(vector_stamp, scope)
        entry = self._cache.get(key, stamp)
        if entry is not None or self.db.path is None:
            return entry
        size = self._sizes.get(stamp)
        if size is None:
            size = await self.db.read(lambda conn: SqliteVectors(conn).count(scope))
            self._sizes = {stamp: size}
        if self._cache.min_items <= size <= self._cache.max_items:
            self._cache.start_build(key, lambda: self._build_entry(key, scope, kinds))
        return None

    def _build_entry(
        self, key: CacheKey, scope: Scope | None, kinds: Sequence[str]
    ) -> CachedVectors | None:
        # Its own connection, so a build of 100k vectors never holds up the reader.
        conn: Any = None
        try:
            conn = self.db.driver.connect(
                str(self.db.path), isolation_level=None, check_same_thread=False
            )
            load_vec_extension(conn)
            return load_entry(
                conn,
                key,
                lambda c: vector_stamp(c, scope),
                lambda c: SqliteVectors(c).load(scope, kinds),  # type: ignore[arg-type]
            )
        finally:
            if conn is not None:
                conn.close()

    async def prepare_vectors(self, scope: Scope | None, kinds: Sequence[ItemKind] = ()) -> bool:
        if self._cache is None:
            return False
        key = _cache_key(scope, kinds)

        def load(conn: Any) -> CachedVectors:
            vectors = SqliteVectors(conn)
            ids, matrix = vectors.load(scope, kinds)
            return CachedVectors(
                vector_stamp(conn, scope), ids, np.ascontiguousarray(matrix, dtype=np.float32)
            )

        stamp = await self.db.read(vector_stamp, scope)
        if self._cache.get(key, stamp) is None:
            self._cache.put(key, await self.db.read(load))
        return self._cache.get(key, await self.db.read(vector_stamp, scope)) is not None

    async def vector_search(
        self,
        vector: np.ndarray,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        k: int = 50,
    ) -> VectorHits:
        entry = await self._cached(scope, kinds)
        if entry is None:
            return await self.read(
                lambda tx: tx.vectors.search(vector, scope, kinds=kinds, where=where, k=k)
            )
        allowed = None
        if where is not None:
            allowed = await self.db.read(matching_item_ids, scope, kinds, where)
        # Off the event loop: other work (the lexical arm's result handling) need not wait.
        hits = await anyio.to_thread.run_sync(top_k, entry, vector, k, allowed)
        return VectorHits(hits, "cache+filter" if where is not None else "cache")

    async def similarities(
        self,
        vector: np.ndarray,
        item_ids: Sequence[int],
        *,
        scope: Scope | None = None,
        kinds: Sequence[ItemKind] = (),
    ) -> dict[int, float]:
        if not item_ids:
            return {}
        entry = await self._cached(scope, kinds) if scope is not None else None
        if entry is not None:
            found = similarities_from(entry, vector, item_ids)
            missing = [i for i in item_ids if i not in found]
            if not missing:
                return found
        else:
            found, missing = {}, list(item_ids)
        stored = await self.db.read(lambda conn: SqliteVectors(conn).vectors(missing))
        if stored:
            ids = list(stored)
            sims = np.vstack([stored[i] for i in ids]) @ np.asarray(vector, dtype=np.float32)
            found.update({i: float(s) for i, s in zip(ids, sims.tolist(), strict=True)})
        return found

    # -- maintenance -----------------------------------------------------------------------

    async def stats(self) -> StoreStats:
        def run(conn: Any) -> StoreStats:
            return collect_stats(conn, self.db.path, self._url.redacted(), self.db.driver)

        return await self.db.read(run)

    async def diagnose(self, *, configured_embedder: str | None) -> list[DoctorFinding]:
        return await anyio.to_thread.run_sync(
            lambda: diagnose_file(
                self.db.path,
                self.db.driver,
                configured_embedder=configured_embedder,
                extra_checks=(consistency_findings,),
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
            item_sql.bump_vector_generation(conn, {r[1] for r in rows})
            return len(rows)

        count = await self.db.write(swap)
        if self._cache is not None:
            self._cache.drop()
        log.info("re-embedded store", items=count, embedder=embedder_id, dimension=dimension)
        return count

    async def dump(self, scope: Scope | None, sink: Callable[[dict[str, Any]], None]) -> int:
        def run(conn: Any) -> int:
            count = 0
            # One read transaction: the whole backup is one snapshot.
            conn.execute("BEGIN")
            try:
                for record in dump_rows(conn, scope.key if scope is not None else None):
                    sink(record)
                    count += 1
            finally:
                conn.execute("COMMIT")
            return count

        return await self.db.read(run)

    async def restore(self, records: Sequence[dict[str, Any]]) -> dict[str, int]:
        batch = list(records)
        counts = await self.db.write(
            lambda conn: restore_rows(conn, batch, decode_vector=decode_embedding)
        )
        if self._cache is not None:
            self._cache.drop()
        return counts

    async def compact(self) -> dict[str, Any]:
        before = (await self.stats()).file_bytes

        def optimise(conn: Any) -> None:
            conn.execute("INSERT INTO item_fts(item_fts) VALUES ('optimize')")

        await self.db.write(optimise)
        await self.db.read(lambda conn: conn.execute("VACUUM"))
        after = (await self.stats()).file_bytes
        return {"file_bytes_before": before, "file_bytes_after": after}
