"""The MySQL / MariaDB implementation of :class:`memory_core.storage.ports.Store`.

The ports the category hierarchy needs (items, lexical, vectors, resources, categories, runs
and events, meta) on the shared server repositories of :mod:`memory_core.storage.server`; the
graph and tombstones are not implemented here (:attr:`MysqlStore.capabilities` says so, and
asking for them is a ConfigError naming the backends that have them). Vectors are blobs
searched exactly (no vector type before MariaDB 11.7). Callbacks run in worker threads on a
small pool of blocking PyMySQL connections, one transaction each.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import cached_property
from typing import Any, NoReturn, TypeVar

import numpy as np
import pymysql
import structlog

from memory_core.config import SearchSettings, StorageSettings
from memory_core.errors import ConfigError, EmbedderMismatchError, MemoirError
from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import DoctorFinding, StoreStats
from memory_core.scope import DEFAULT_SCOPE_SCHEMA, Scope, ScopeSchema
from memory_core.storage.mysql.database import MyConn, MysqlDatabase
from memory_core.storage.mysql.items import EMBEDDING_DIM_KEY, MyItems, bump_vector_generation
from memory_core.storage.mysql.lexical import MyLexical
from memory_core.storage.mysql.repos import MyCategories, MyLog, MyMeta, MyResources
from memory_core.storage.mysql.vectors import MyVectors, cosine_top
from memory_core.storage.ports import BackendName, Capability, Tx, VectorHits
from memory_core.storage.url import DatabaseURL

__all__ = ["MYSQL_CAPABILITIES", "MyTx", "MysqlStore"]

log = structlog.get_logger(__name__)
T = TypeVar("T")

EMBEDDER_ID_KEY = "embedder_id"
MYSQL_CAPABILITIES: frozenset[Capability] = frozenset(
    ("items", "lexical", "vectors", "resources", "categories", "log")
)
_TABLES = ("resource", "item", "category", "event", "run")


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


def _ensure_embedder(conn: MyConn, embedder_id: str, dimension: int) -> bool:
    meta = MyMeta(conn)
    conn.execute("SELECT `key` FROM meta WHERE `key` = %s FOR UPDATE", (EMBEDDER_ID_KEY,))
    stored_id, stored_dim = meta.get(EMBEDDER_ID_KEY), meta.get(EMBEDDING_DIM_KEY)
    if stored_id is None and stored_dim is None:
        meta.set(EMBEDDER_ID_KEY, embedder_id)
        meta.set(EMBEDDING_DIM_KEY, str(dimension))
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


class MysqlStore:
    """A memoir store in one MySQL / MariaDB database (the hierarchy's ports)."""

    def __init__(
        self,
        url: DatabaseURL,
        settings: StorageSettings | None = None,
        *,
        search: SearchSettings | None = None,
        scope_schema: ScopeSchema = DEFAULT_SCOPE_SCHEMA,
        pool_size: int = 4,
    ) -> None:
        del settings, search  # SQLite-only knobs
        self._url = url
        self._scope_schema = scope_schema
        self.db = MysqlDatabase(url, pool_size=pool_size)

    @property
    def backend(self) -> BackendName:
        return "mysql"

    @property
    def url(self) -> DatabaseURL:
        return self._url

    @property
    def scope_schema(self) -> ScopeSchema:
        return self._scope_schema

    @property
    def capabilities(self) -> frozenset[Capability]:
        return MYSQL_CAPABILITIES

    async def open(self, *, create: bool = True) -> MysqlStore:
        import anyio

        await anyio.to_thread.run_sync(lambda: self.db.migrate(create=create))
        return self

    async def close(self) -> None:
        self.db.close_all()

    async def read(self, fn: Callable[[Tx], T]) -> T:
        return await self.db.read(lambda conn: fn(MyTx(conn)))

    async def write(self, fn: Callable[[Tx], T]) -> T:
        return await self.db.write(lambda conn: fn(MyTx(conn)))

    async def ensure_embedder(self, embedder_id: str, dimension: int) -> bool:
        return await self.db.write(lambda conn: _ensure_embedder(conn, embedder_id, dimension))

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
        found = await self.read(lambda tx: tx.vectors.vectors(item_ids))
        if not found:
            return {}
        ids = np.fromiter(found, dtype=np.int64, count=len(found))
        matrix = np.vstack([found[int(i)] for i in ids])
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        return {h.item_id: h.score for h in cosine_top(query, ids, matrix, len(ids))}

    async def prepare_vectors(self, scope: Scope | None, kinds: Sequence[ItemKind] = ()) -> bool:
        return False  # exact search in the database; nothing to build in the process

    async def stats(self) -> StoreStats:
        def run(conn: MyConn) -> StoreStats:
            counts = {
                table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                for table in _TABLES
            }
            by_kind = {
                str(k): int(n)
                for k, n in conn.execute(
                    "SELECT kind, count(*) FROM item WHERE deleted = 0 GROUP BY kind ORDER BY kind"
                )
            }
            size = conn.execute(
                "SELECT coalesce(sum(data_length + index_length), 0) FROM information_schema.tables "
                "WHERE table_schema = DATABASE()"
            ).fetchone()
            meta = MyMeta(conn)
            dim = meta.get(EMBEDDING_DIM_KEY)
            return StoreStats(
                url=self._url.redacted(),
                backend="mysql",
                file_bytes=int(size[0]) if size else None,
                wal_bytes=None,
                journal_mode=None,
                schema_migrations=[
                    f"{int(r[0]):04d}_{r[1]}"
                    for r in conn.execute("SELECT version, name FROM schema_migration ORDER BY 1")
                ],
                counts=counts,
                items_by_kind=by_kind,
                embedder_id=meta.get(EMBEDDER_ID_KEY),
                embedding_dim=int(dim) if dim else None,
                vectors=MyVectors(conn).count(),
                sqlite_version=None,
                vec_version=f"exact float32 blobs ({self.db.server_version})",
                driver=f"PyMySQL {pymysql.__version__}",
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
                "mysql",
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
        """Recompute every vector with ``embed``, then replace the vector rows and record the
        embedder in one transaction."""

        def load(conn: MyConn) -> list[tuple[int, str, str, str]]:
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

        def swap(conn: MyConn) -> int:
            conn.execute("DELETE FROM item_vec")
            meta = MyMeta(conn)
            meta.set(EMBEDDER_ID_KEY, embedder_id)
            meta.set(EMBEDDING_DIM_KEY, str(dimension))
            items = MyItems(conn)
            items._insert_vectors(
                [
                    (r[0], r[1], r[2], items.vector_value(v, dimension))
                    for r, v in zip(rows, matrix, strict=True)
                ]
            )
            bump_vector_generation(conn, {r[1] for r in rows})
            return len(rows)

        count = await self.db.write(swap)
        log.info("re-embedded store", items=count, embedder=embedder_id, dimension=dimension)
        return count

    async def compact(self) -> dict[str, Any]:
        before = (await self.stats()).file_bytes

        def optimize(conn: MyConn) -> None:
            for table in ("item", "item_term", "item_vec", "resource"):
                conn.execute(f"OPTIMIZE TABLE {table}").fetchall()

        await self.db.read(optimize)
        after = (await self.stats()).file_bytes
        return {"file_bytes_before": before, "file_bytes_after": after}

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
