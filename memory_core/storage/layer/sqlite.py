"""The SQLite layer store (seed 004 §11.2): scope fields as real columns by dynamic DDL.

Every core table gets the user's scope fields, in order, as ``TEXT NOT NULL`` columns, and every
composite index starts with them. Item text is indexed by an external-content FTS5 table (kept
in step by hand: FTS5 does not follow its content table). Vectors are float32 blobs compared by
brute force in numpy (§11.2); the matrix of a scope range is cached and kept current row by
row by this store's own writes, and rebuilt when another connection changes items: triggers
count every change of ``layer_item`` in ``layer_item_generation``, read only when
``PRAGMA data_version`` says another connection committed something (a run log, a category or
an intention written elsewhere no longer drops the matrix).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memory_core.errors import (
    DatabaseCorruptError,
    DatabaseUnavailableError,
    SchemaError,
    StorageError,
)
from memory_core.storage.layer import centroids
from memory_core.storage.layer import sql_common as sql
from memory_core.storage.layer.centroids import CategorySums, Membership
from memory_core.storage.layer.leases import (
    LEASE_TABLE_DDL,
    lease_claim_sql,
    lease_holder_sql,
    lease_release_sql,
)
from memory_core.storage.layer.port import (
    CategoryRow,
    DdlMode,
    IntentionRow,
    ItemRow,
    MemberRow,
    ResourceRow,
    RevisionRow,
    RunRow,
    ScopeFilter,
    ScopeValues,
    matches,
)
from memory_core.storage.layer.sql_common import quote_ident as _q
from memory_core.storage.layer.vectors import VectorBlock
from memory_core.storage.sqlite.driver import select_driver
from memory_core.storage.sqlite.fts import match_expression

__all__ = ["SqliteLayerStore", "layer_ddl", "scope_where"]

T = TypeVar("T")


def layer_ddl(fields: Sequence[str]) -> list[str]:
    """The statements that provision the layer's tables for scope ``fields`` (in order)."""
    cols = ", ".join(f"{_q(f)} TEXT NOT NULL" for f in fields)
    prefix = ", ".join(_q(f) for f in fields)
    return [
        f"CREATE TABLE IF NOT EXISTS layer_resource ({cols}, resource_id TEXT PRIMARY KEY, "
        "kind TEXT NOT NULL, uri TEXT, content TEXT, content_hash TEXT NOT NULL, mime TEXT, "
        "metadata TEXT NOT NULL, artifacts TEXT NOT NULL, pipeline_revision INTEGER NOT NULL, "
        "created_at REAL NOT NULL)",
        f"CREATE UNIQUE INDEX IF NOT EXISTS layer_resource_scope_hash ON layer_resource "
        f"({prefix}, content_hash, pipeline_revision)",
        f"CREATE TABLE IF NOT EXISTS layer_item ({cols}, item_id TEXT NOT NULL UNIQUE, "
        "resource_id TEXT NOT NULL, text TEXT NOT NULL, evidence TEXT NOT NULL, "
        "confidence REAL NOT NULL, stability TEXT NOT NULL, version INTEGER NOT NULL, "
        "category_key TEXT, status TEXT NOT NULL, embedding BLOB, created_at REAL NOT NULL, "
        "updated_at REAL NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS layer_item_scope_status ON layer_item ({prefix}, status)",
        f"CREATE INDEX IF NOT EXISTS layer_item_scope_category ON layer_item "
        f"({prefix}, category_key)",
        "CREATE VIRTUAL TABLE IF NOT EXISTS layer_item_fts USING fts5(text, "
        "content='layer_item', content_rowid='rowid')",
        f"CREATE TABLE IF NOT EXISTS layer_category ({cols}, category_key TEXT NOT NULL, "
        "name TEXT NOT NULL, description TEXT NOT NULL, summary TEXT NOT NULL, "
        "anchor_ids TEXT NOT NULL, item_count INTEGER NOT NULL, updated_at REAL NOT NULL)",
        f"CREATE UNIQUE INDEX IF NOT EXISTS layer_category_scope_key ON layer_category "
        f"({prefix}, category_key)",
        f"CREATE TABLE IF NOT EXISTS layer_intention ({cols}, version INTEGER NOT NULL, "
        "goals TEXT NOT NULL, constraints TEXT NOT NULL, progress TEXT NOT NULL, "
        "source_item_ids TEXT NOT NULL, created_at REAL NOT NULL)",
        f"CREATE UNIQUE INDEX IF NOT EXISTS layer_intention_scope_version ON layer_intention "
        f"({prefix}, version)",
        "CREATE TABLE IF NOT EXISTS layer_revision (revision INTEGER PRIMARY KEY, "
        "change TEXT NOT NULL, pipelines TEXT NOT NULL, created_at REAL NOT NULL)",
        "CREATE TABLE IF NOT EXISTS layer_run (run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, "
        "body TEXT NOT NULL, created_at REAL NOT NULL)",
        *centroids.sums_ddl(fields, text="TEXT", blob="BLOB", real="REAL"),
        *ITEM_GENERATION_DDL,
        LEASE_TABLE_DDL.format(real="REAL"),
    ]


# Every change of an item row, by any connection, counts one: a cached vector matrix is valid
# while the count is the one it was read at.
ITEM_GENERATION_DDL = [
    "CREATE TABLE IF NOT EXISTS layer_item_generation "
    "(id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO layer_item_generation (id, value) VALUES (1, 0)",
    *(
        f"CREATE TRIGGER IF NOT EXISTS layer_item_generation_{event.lower()} AFTER {event} "
        "ON layer_item BEGIN UPDATE layer_item_generation SET value = value + 1 WHERE id = 1; END"
        for event in ("INSERT", "UPDATE", "DELETE")
    ),
]


def scope_where(selector: ScopeFilter, alias: str = "") -> tuple[str, list[Any]]:
    """``(sql, params)`` for a selector: ``field = ?`` / ``field IN (?, …)``; ANY adds nothing."""
    return sql.scope_where(selector, mark="?", alias=alias)


@dataclass
class _CachedBlock:
    """The vectors of one selector, as of ``data_version`` and the item ``generation``."""

    data_version: int
    generation: int | None
    selector: ScopeFilter
    block: VectorBlock


def _blob_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32).copy()


def _open_error(path: str, exc: BaseException) -> StorageError:
    """Why the layer's SQLite file cannot be opened, and what to change."""
    where = "`store` in the layer file (relative to it), or storage_providers' metadata_store path"
    if "not a database" in str(exc) or "malformed" in str(exc):
        return DatabaseCorruptError(
            f"the layer store {path} is not a SQLite database, or is corrupt: {exc}",
            hint=f"point the layer at a new file ({where}), or move this one aside",
        )
    return DatabaseUnavailableError(
        f"cannot open the layer store {path}: {exc}",
        hint=f"check that its folder exists and is writable by this user; the path is {where}",
    )


class SqliteLayerStore:
    """One connection (WAL, busy timeout), serialised by a lock; writes are ``BEGIN IMMEDIATE``."""

    backend = "sqlite"

    def __init__(self, path: str | Path, *, vectors: bool = True) -> None:
        self.path = str(path)
        self.vector_capable = vectors
        driver = select_driver()
        try:
            self._conn = driver.connect(self.path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            # WAL: durable at checkpoints, never torn
            self._conn.execute("PRAGMA synchronous=NORMAL")
        except driver.module.Error as exc:
            raise _open_error(self.path, exc) from exc
        self._lock = threading.RLock()
        self._in_transaction = False  # an atomically() block holds the lock and a transaction
        self._fields: tuple[str, ...] = ()
        # selector -> its cached vectors; this store's writes update the blocks in place,
        # another connection's change of items (the item generation) drops them
        self._matrix_cache: dict[Any, _CachedBlock] = {}
        self._generation_table = False  # a store provisioned before the table had none

    # -- plumbing ----------------------------------------------------------------------------

    def _write(self, work: Callable[[Any], T]) -> T:
        with self._lock:
            if self._in_transaction:
                return work(self._conn)  # inside atomically(): its transaction
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(self._conn)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

    def atomically(self, work: Callable[[], T]) -> T:
        with self._lock:
            if self._in_transaction:
                return work()
            self._conn.execute("BEGIN IMMEDIATE")
            self._in_transaction = True
            try:
                result = work()
            except BaseException:
                self._conn.execute("ROLLBACK")
                self._matrix_cache.clear()  # they took writes that are rolled back
                raise
            finally:
                self._in_transaction = False
            self._conn.execute("COMMIT")
            return result

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return list(self._conn.execute(sql, list(params)).fetchall())

    def _tables(self) -> set[str]:
        return {r[0] for r in self._read("SELECT name FROM sqlite_master WHERE type='table'")}

    def _columns(self, table: str) -> list[str]:
        return [r[1] for r in self._read(f"PRAGMA table_info({table})")]

    # -- schema -----------------------------------------------------------------------------

    def provision(self, fields: Sequence[str], mode: DdlMode) -> None:
        fields = tuple(fields)
        if mode == "create":
            upgrade = centroids.SUMS_TABLE not in self._tables()

            def create(conn: Any) -> None:
                for statement in layer_ddl(fields):
                    conn.execute(statement)
                if upgrade:  # a store from before the sums: fill them from its items
                    self._rebuild_sums(conn, fields)

            self._ensure_meta_table()
            self._write(create)
        tables = self._tables()
        if "layer_item" in tables and centroids.SUMS_TABLE not in tables:
            raise SchemaError(
                f"ddl_mode='validate' but {self.path} predates the category centroid sums "
                f"(table {centroids.SUMS_TABLE!r}, layer ddl_version 2)",
                hint="open it once with ddl_mode='create': that adds the table and fills it "
                "from the stored items",
            )
        for table in sql.SCOPED_TABLES:
            if table not in tables:
                raise SchemaError(
                    f"ddl_mode='validate' but table {table!r} is missing from {self.path}",
                    hint="create the service once with ddl_mode='create'",
                )
            head = self._columns(table)[: len(fields)]
            if tuple(head) != fields:
                raise SchemaError(
                    f"table {table!r} in {self.path} has scope columns {head}, "
                    f"the scope model declares {list(fields)}",
                    hint="use the scope model the database was created with, or a new database",
                )
        self._fields = fields
        self._generation_table = "layer_item_generation" in tables

    def _item_generation(self, conn: Any) -> int | None:
        if not self._generation_table:
            return None
        return int(conn.execute("SELECT value FROM layer_item_generation").fetchone()[0])

    def _rebuild_sums(self, conn: Any, fields: Sequence[str]) -> None:
        cols = sql.scope_columns(fields)
        rows = conn.execute(
            f"SELECT {cols}, category_key, confidence, embedding FROM layer_item "
            "WHERE status = 'active' AND category_key IS NOT NULL"
        ).fetchall()
        n = len(fields)
        centroids.rebuild_sums(
            conn,
            fields,
            "?",
            (
                (
                    tuple(r[:n]),
                    r[n],
                    float(r[n + 1]),
                    None if r[n + 2] is None else _blob_vector(r[n + 2]),
                )
                for r in rows
            ),
        )

    def _ensure_meta_table(self) -> None:
        self._write(lambda c: c.execute(sql.META_TABLE_DDL))

    def get_meta(self) -> dict[str, Any] | None:
        if "layer_meta" not in self._tables():
            return None
        return sql.meta_value(self._read(sql.get_meta_sql()))

    def set_meta(self, meta: Mapping[str, Any]) -> None:
        self._ensure_meta_table()
        self._write(lambda c: c.execute(sql.set_meta_sql("?"), [sql.meta_param(meta)]))

    def _cols(self) -> str:
        return sql.scope_columns(self._fields)

    # -- resources --------------------------------------------------------------------------

    def find_resource(
        self, scope: ScopeValues, content_hash: str, revision: int
    ) -> ResourceRow | None:
        where, params = scope_where({k: (v,) for k, v in scope.items()})
        rows = self._read(
            f"SELECT {self._cols()}, {sql.RESOURCE_COLUMNS} FROM layer_resource "
            f"WHERE {where} AND content_hash = ? AND pipeline_revision = ?",
            [*params, content_hash, revision],
        )
        return sql.resource_row(self._fields, rows[0]) if rows else None

    def add_resource(self, row: ResourceRow) -> None:
        marks = sql.marks("?", len(self._fields) + 10)
        self._write(
            lambda c: c.execute(
                f"INSERT OR IGNORE INTO layer_resource ({self._cols()}, {sql.RESOURCE_COLUMNS}) "
                f"VALUES ({marks})",
                sql.resource_params(self._fields, row),
            )
        )

    # -- items ------------------------------------------------------------------------------

    def upsert_items(self, rows: Sequence[ItemRow]) -> None:
        cols = self._cols()
        marks = sql.marks("?", len(self._fields) + 12)

        generations: list[int | None] = []

        def work(conn: Any) -> None:
            generations.append(self._item_generation(conn))
            changes: list[tuple[tuple[str, ...], Membership | None, ItemRow]] = []
            for row in rows:
                old = conn.execute(
                    "SELECT rowid, text, status, category_key, embedding FROM layer_item "
                    "WHERE item_id = ?",
                    [row.item_id],
                ).fetchone()
                member: Membership | None = None
                if old is not None:
                    vector = None if old[4] is None else _blob_vector(old[4])
                    member = (old[3], old[2] == "active", vector)
                changes.append((tuple(row.scope[f] for f in self._fields), member, row))
                if old is not None and old[2] == "active":
                    conn.execute(
                        "INSERT INTO layer_item_fts(layer_item_fts, rowid, text) "
                        "VALUES ('delete', ?, ?)",
                        [old[0], old[1]],
                    )
                blob = None if row.embedding is None else row.embedding.astype(np.float32).tobytes()
                conn.execute(
                    f"INSERT INTO layer_item ({cols}, {sql.ITEM_COLUMNS}) "
                    f"VALUES ({marks}) ON CONFLICT(item_id) DO UPDATE SET "
                    "text=excluded.text, evidence=excluded.evidence, "
                    "confidence=excluded.confidence, stability=excluded.stability, "
                    "version=excluded.version, category_key=excluded.category_key, "
                    "status=excluded.status, embedding=excluded.embedding, "
                    "updated_at=excluded.updated_at",
                    sql.item_values(self._fields, row, row.text, blob),
                )
                if row.status == "active":
                    rowid = conn.execute(
                        "SELECT rowid FROM layer_item WHERE item_id = ?", [row.item_id]
                    ).fetchone()[0]
                    conn.execute(
                        "INSERT INTO layer_item_fts(rowid, text) VALUES (?, ?)", [rowid, row.text]
                    )
            centroids.sync_sums(conn, self._fields, "?", changes)

            generations.append(self._item_generation(conn))

        with self._lock:
            self._write(work)
            before, after = generations
            for key, cached in list(self._matrix_cache.items()):
                if cached.generation != before:
                    del self._matrix_cache[key]  # it missed another connection's change
                    continue
                cached.generation = after
                selector, block = cached.selector, cached.block
                for row in rows:
                    live = row.status == "active" and row.embedding is not None
                    if live and matches(row.scope, selector):
                        block.put(row.item_id, np.asarray(row.embedding, dtype=np.float32))
                    else:
                        block.drop(row.item_id)

    def _item_select(self) -> str:
        return f"SELECT {self._cols()}, {sql.ITEM_COLUMNS} FROM layer_item"

    def _item(self, row: Sequence[Any]) -> ItemRow:
        return sql.item_row(self._fields, row, _blob_vector)

    def items(
        self,
        selector: ScopeFilter,
        *,
        status: str | None = "active",
        limit: int | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[ItemRow]:
        where, params = scope_where(selector)
        query = f"{self._item_select()} WHERE {where}"
        if status is not None:
            query += " AND status = ?"
            params.append(status)
        if categories is not None:
            query += f" AND category_key IN ({sql.marks('?', len(categories)) or 'NULL'})"
            params.extend(categories)
        query += " ORDER BY created_at, item_id"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        return [self._item(r) for r in self._read(query, params)]

    def items_by_id(self, item_ids: Sequence[str]) -> list[ItemRow]:
        if not item_ids:
            return []
        marks = sql.marks("?", len(item_ids))
        found = {
            row.item_id: row
            for row in (
                self._item(r)
                for r in self._read(f"{self._item_select()} WHERE item_id IN ({marks})", item_ids)
            )
        }
        return [found[i] for i in item_ids if i in found]

    def count_items(self, selector: ScopeFilter) -> int:
        where, params = scope_where(selector)
        rows = self._read(
            f"SELECT count(*) FROM layer_item WHERE {where} AND status = 'active'", params
        )
        return int(rows[0][0])

    def category_members(self, scope: ScopeValues, keys: Sequence[str]) -> list[MemberRow]:
        if not keys:
            return []
        where, params = scope_where({f: (scope[f],) for f in self._fields})
        rows = self._read(
            "SELECT item_id, category_key, text, confidence, embedding FROM layer_item "
            f"WHERE {where} AND category_key IN ({', '.join('?' * len(keys))}) "
            "AND status = 'active' ORDER BY created_at, item_id",
            [*params, *keys],
        )
        return [
            MemberRow(
                r[0], r[1], r[2], r[3], None if r[4] is None else np.frombuffer(r[4], np.float32)
            )
            for r in rows
        ]

    def category_sums(self, scope: ScopeValues, keys: Sequence[str]) -> dict[str, CategorySums]:
        scope_key = [scope[f] for f in self._fields]
        with self._lock:
            return centroids.read_sums(self._conn, self._fields, "?", scope_key, keys)

    def put_category_sums(self, scope: ScopeValues, sums: Mapping[str, CategorySums]) -> None:
        scope_key = [scope[f] for f in self._fields]
        self._write(lambda c: centroids.write_sums(c, self._fields, "?", scope_key, sums))

    def vector_search(
        self, selector: ScopeFilter, vector: np.ndarray, k: int
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        key = tuple(sorted((n, v) for n, v in selector.items()))
        with self._lock:
            version = int(self._read("PRAGMA data_version")[0][0])
            cached = self._matrix_cache.get(key)
            if cached is not None and cached.data_version != version:
                # another connection committed: only a change of items invalidates
                generation = self._item_generation(self._conn)
                if generation is not None and generation == cached.generation:
                    cached.data_version = version
                else:
                    cached = None
            if cached is None:
                generation = self._item_generation(self._conn)  # before the rows: never newer
                where, params = scope_where(selector)
                rows = self._read(
                    f"SELECT item_id, embedding FROM layer_item WHERE {where} "
                    "AND status = 'active' AND embedding IS NOT NULL",
                    params,
                )
                block = VectorBlock(len(vector))
                for item_id, blob in rows:
                    block.put(item_id, np.frombuffer(blob, dtype=np.float32))
                if len(self._matrix_cache) > 32:
                    self._matrix_cache.clear()
                cached = _CachedBlock(version, generation, dict(selector), block)
                self._matrix_cache[key] = cached
            return cached.block.top(vector, k)

    def vector_search_many(
        self, selector: ScopeFilter, vectors: Sequence[np.ndarray], k: int
    ) -> list[list[tuple[str, float]]]:
        with self._lock:
            return [self.vector_search(selector, v, k) for v in vectors]

    def lexical_search(
        self, selector: ScopeFilter, terms: Sequence[str], k: int
    ) -> list[tuple[str, float]]:
        # Control characters end an FTS5 string early (NUL: "unterminated string"): drop them;
        # every term is then a quoted string, so no user text is read as query syntax.
        cleaned = ("".join(ch for ch in t if ch >= " ").strip() for t in terms)
        match = match_expression([w for w in cleaned if w], "OR")
        if match is None or k <= 0:
            return []
        where, params = scope_where(selector, alias="i.")
        rows = self._read(
            # CROSS JOIN keeps FTS5 as the outer loop: the planner would otherwise walk the
            # scope index and run MATCH once per row of the scope range.
            "SELECT i.item_id, -bm25(layer_item_fts) AS score FROM layer_item_fts "
            "CROSS JOIN layer_item i ON i.rowid = layer_item_fts.rowid "
            f"WHERE layer_item_fts MATCH ? AND {where} AND i.status = 'active' "
            "ORDER BY score DESC, i.item_id LIMIT ?",
            [match, *params, k],
        )
        return [(r[0], float(r[1])) for r in rows]

    # -- categories, intentions -------------------------------------------------------------

    def upsert_categories(self, rows: Sequence[CategoryRow]) -> None:
        marks = sql.marks("?", len(self._fields) + 7)

        def work(conn: Any) -> None:
            for row in rows:
                conn.execute(
                    f"INSERT INTO layer_category ({self._cols()}, {sql.CATEGORY_COLUMNS}) "
                    f"VALUES ({marks}) ON CONFLICT DO UPDATE SET name=excluded.name, "
                    "description=excluded.description, summary=excluded.summary, "
                    "anchor_ids=excluded.anchor_ids, item_count=excluded.item_count, "
                    "updated_at=excluded.updated_at",
                    sql.category_params(self._fields, row),
                )

        self._write(work)

    def categories(self, selector: ScopeFilter) -> list[CategoryRow]:
        where, params = scope_where(selector)
        rows = self._read(
            f"SELECT {self._cols()}, {sql.CATEGORY_COLUMNS} FROM layer_category WHERE {where} "
            f"ORDER BY {self._cols()}, category_key",
            params,
        )
        return [sql.category_row(self._fields, row) for row in rows]

    def add_intention(self, row: IntentionRow) -> None:
        marks = sql.marks("?", len(self._fields) + 6)
        self._write(
            lambda c: c.execute(
                f"INSERT INTO layer_intention ({self._cols()}, {sql.INTENTION_COLUMNS}) "
                f"VALUES ({marks})",
                sql.intention_params(self._fields, row),
            )
        )

    def latest_intentions(self, selector: ScopeFilter) -> list[IntentionRow]:
        where, params = scope_where(selector, alias="i.")
        join = " AND ".join(f"l.{_q(f)} = i.{_q(f)}" for f in self._fields)
        scoped = sql.scope_columns(self._fields, alias="i.")
        rows = self._read(
            f"SELECT {scoped}, i.version, i.goals, "
            "i.constraints, i.progress, i.source_item_ids, i.created_at FROM layer_intention i "
            f"WHERE {where} AND NOT EXISTS (SELECT 1 FROM layer_intention l WHERE {join} "
            "AND l.version > i.version) "
            f"ORDER BY {scoped}",
            params,
        )
        return [sql.intention_row(self._fields, row) for row in rows]

    # -- revisions, runs --------------------------------------------------------------------

    def add_revision(self, row: RevisionRow) -> None:
        self._write(
            lambda c: c.execute(
                sql.revision_insert("?"),
                [row.revision, row.change, json.dumps(row.pipelines), row.created_at],
            )
        )

    def revisions(self) -> list[RevisionRow]:
        return [sql.revision_row(r) for r in self._read(sql.REVISION_SELECT)]

    def add_run(self, row: RunRow) -> None:
        self._write(
            lambda c: c.execute(
                sql.run_insert("?"), [row.run_id, row.kind, json.dumps(row.body), row.created_at]
            )
        )

    def runs(self, limit: int = 50) -> list[RunRow]:
        return [
            sql.run_row(r)
            for r in self._read(
                f"SELECT {sql.RUN_COLUMNS} FROM layer_run "
                "ORDER BY created_at DESC, rowid DESC LIMIT ?",
                [limit],
            )
        ]

    def finished_run(self, kind: str, runner_run_id: str) -> RunRow | None:
        rows = self._read(
            f"SELECT {sql.RUN_COLUMNS} FROM layer_run WHERE kind = ? "
            "AND json_extract(body, '$.runner_run_id') = ? "
            "AND json_extract(body, '$.status') = 'ok' "
            "ORDER BY created_at DESC, rowid DESC LIMIT 1",
            [kind, runner_run_id],
        )
        return sql.run_row(rows[0]) if rows else None

    # -- leases -----------------------------------------------------------------------------

    def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        def work(conn: Any) -> bool:
            # a store provisioned before leases, or opened in validate mode, has no table yet
            conn.execute(LEASE_TABLE_DDL.format(real="REAL"))
            conn.execute(lease_claim_sql("sqlite"), [name, holder, ttl_s])
            row = conn.execute(lease_holder_sql("sqlite"), [name]).fetchone()
            return row is not None and row[0] == holder

        return self._write(work)

    def release_lease(self, name: str, holder: str) -> None:
        self._write(lambda c: c.execute(lease_release_sql("sqlite"), [name, holder]))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
