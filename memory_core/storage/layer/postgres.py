"""The PostgreSQL + pgvector layer store (seed 004 §11.3): the production path.

Every core table gets the user's scope fields, in order, as ``TEXT COLLATE "C" NOT NULL``
columns (byte order, as SQLite and the in-memory store sort), and every composite index starts
with them. Items carry:

- ``embedding vector``: untyped until the first vector arrives, then fixed to its dimension
  with an HNSW index (inner product, as the brute-force stores score). A search whose scope
  range has fewer than :data:`EXACT_BELOW` vectors scores them exactly (cheaper than the graph
  and identical to brute force); a wider range walks the graph with pgvector's iterative scan
  and falls back to exact scoring when the walk stops short of ``k`` rows.
- ``tsv tsvector``: the text's tokens as the in-memory store splits them (``\\w+``, lowercased,
  positions kept), written as a tsvector literal so PostgreSQL's own parser never re-splits
  them, under a GIN index. Search is Okapi BM25 in SQL with the in-memory store's formula and
  its statistics taken over the selector's scope range (no other scope moves a score).

A write that grows ``layer_item`` substantially (:data:`ANALYZE_MIN_ROWS` new rows, and at
least :data:`ANALYZE_GROWTH` of its size at the last ANALYZE) runs ``ANALYZE layer_item`` once it
commits: left to autovacuum, a bulk load is planned as the empty table it was, and a wide search
scores its range through the scope B-tree instead of walking the HNSW graph until then.

Each call is one transaction on a pooled connection, or part of the caller's one transaction
inside :meth:`PostgresLayerStore.atomically` (:class:`PgDatabase`: reconnects after a
drop, retries a deadlock); provisioning holds an advisory lock so two processes opening a fresh
database do not both create the tables.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import psycopg
import structlog

from memory_core.errors import ConfigError, MemoirError, SchemaError
from memory_core.storage.layer import centroids
from memory_core.storage.layer import sql_common as sql
from memory_core.storage.layer.centroids import CategorySums, Membership
from memory_core.storage.layer.leases import (
    LEASE_TABLE_DDL,
    lease_claim_sql,
    lease_holder_sql,
    lease_release_sql,
)
from memory_core.storage.layer.memory import lexical_tokens
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
)
from memory_core.storage.layer.sql_common import quote_ident as _q
from memory_core.storage.postgres.database import PgDatabase, PgVector
from memory_core.storage.url import DatabaseURL, parse_database_url

__all__ = [
    "ANALYZE_GROWTH",
    "ANALYZE_MIN_ROWS",
    "EXACT_BELOW",
    "PostgresLayerStore",
    "layer_pg_ddl",
    "pg_scope_where",
    "tsvector_literal",
]

T = TypeVar("T")
log = structlog.get_logger(__name__)
Conn = psycopg.Connection[Any]
_LOCK_KEY = 0x6D656D6F6972_04  # "memoir" + layer schema
# Exact scoring below this many vectors in the scope range: cheaper than the graph, and exact.
EXACT_BELOW = 2_000
_EF_SEARCH = 200
# ANALYZE after a write when this process has added at least this many items since the last one,
# and at least this share of the table's size then (autovacuum's default share is 0.1 plus 50
# rows, but only on its own schedule). ANALYZE samples at most 30,000 rows: ~0.1-0.3 s.
ANALYZE_MIN_ROWS = 1_000
ANALYZE_GROWTH = 0.2
_MAX_LEXEME_BYTES = 2_000  # PostgreSQL refuses lexemes over 2 KiB
_MAX_POSITIONS = 256  # and keeps at most 256 positions per lexeme
_K1 = 1.2
_B = 0.75


def layer_pg_ddl(fields: Sequence[str]) -> list[str]:
    """The statements that provision the layer's tables for scope ``fields`` (in order)."""
    cols = ", ".join(f'{_q(f)} TEXT COLLATE "C" NOT NULL' for f in fields)
    prefix = ", ".join(_q(f) for f in fields)
    key = 'TEXT COLLATE "C"'
    return [
        f"CREATE TABLE IF NOT EXISTS layer_resource ({cols}, resource_id {key} PRIMARY KEY, "
        "kind TEXT NOT NULL, uri TEXT, content TEXT, content_hash TEXT NOT NULL, mime TEXT, "
        "metadata TEXT NOT NULL, artifacts TEXT NOT NULL, pipeline_revision INTEGER NOT NULL, "
        "created_at DOUBLE PRECISION NOT NULL)",
        "CREATE UNIQUE INDEX IF NOT EXISTS layer_resource_scope_hash ON layer_resource "
        f"({prefix}, content_hash, pipeline_revision)",
        f"CREATE TABLE IF NOT EXISTS layer_item ({cols}, item_id {key} NOT NULL UNIQUE, "
        "resource_id TEXT NOT NULL, text TEXT NOT NULL, evidence TEXT NOT NULL, "
        "confidence DOUBLE PRECISION NOT NULL, stability TEXT NOT NULL, version INTEGER NOT NULL, "
        f"category_key {key}, status TEXT NOT NULL, embedding vector, tsv tsvector NOT NULL, "
        "lex_len INTEGER NOT NULL, created_at DOUBLE PRECISION NOT NULL, "
        "updated_at DOUBLE PRECISION NOT NULL)",
        # INCLUDE lex_len: the BM25 statistics of a scope range are an index-only scan.
        "CREATE INDEX IF NOT EXISTS layer_item_scope_status ON layer_item "
        f"({prefix}, status) INCLUDE (lex_len)",
        "CREATE INDEX IF NOT EXISTS layer_item_scope_category ON layer_item "
        f"({prefix}, category_key)",
        "CREATE INDEX IF NOT EXISTS layer_item_tsv ON layer_item USING gin (tsv)",
        f"CREATE TABLE IF NOT EXISTS layer_category ({cols}, category_key {key} NOT NULL, "
        "name TEXT NOT NULL, description TEXT NOT NULL, summary TEXT NOT NULL, "
        "anchor_ids TEXT NOT NULL, item_count INTEGER NOT NULL, "
        "updated_at DOUBLE PRECISION NOT NULL)",
        "CREATE UNIQUE INDEX IF NOT EXISTS layer_category_scope_key ON layer_category "
        f"({prefix}, category_key)",
        f"CREATE TABLE IF NOT EXISTS layer_intention ({cols}, version INTEGER NOT NULL, "
        "goals TEXT NOT NULL, constraints TEXT NOT NULL, progress TEXT NOT NULL, "
        "source_item_ids TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)",
        "CREATE UNIQUE INDEX IF NOT EXISTS layer_intention_scope_version ON layer_intention "
        f"({prefix}, version)",
        "CREATE TABLE IF NOT EXISTS layer_revision (revision INTEGER PRIMARY KEY, "
        "change TEXT NOT NULL, pipelines TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE IF NOT EXISTS layer_run (seq BIGINT GENERATED ALWAYS AS IDENTITY, "
        f"run_id {key} PRIMARY KEY, kind TEXT NOT NULL, body TEXT NOT NULL, "
        "created_at DOUBLE PRECISION NOT NULL)",
        *centroids.sums_ddl(fields, text=key, blob="BYTEA", real="DOUBLE PRECISION"),
        LEASE_TABLE_DDL.format(real="DOUBLE PRECISION"),
    ]


def pg_scope_where(selector: ScopeFilter, alias: str = "") -> tuple[str, list[Any]]:
    """``(sql, params)`` for a selector: ``field = %s`` / ``field = ANY(%s)``; ANY adds nothing."""
    return sql.scope_where(selector, mark="%s", alias=alias)


def _lexeme(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def _usable(token: str) -> bool:
    return 0 < len(token.encode()) <= _MAX_LEXEME_BYTES and "\x00" not in token


def tsvector_literal(text: str) -> tuple[str, int]:
    """``text``'s tokens (as the in-memory store splits them) as a tsvector literal, and their
    count (the BM25 document length)."""
    tokens = lexical_tokens(text)
    positions: dict[str, list[int]] = defaultdict(list)
    for at, token in enumerate(tokens, start=1):
        if _usable(token) and len(positions[token]) < _MAX_POSITIONS:
            positions[token].append(min(at, 16_383))
    body = " ".join(f"{_lexeme(t)}:{','.join(map(str, p))}" for t, p in positions.items() if p)
    return body, len(tokens)


def _clean(text: str | None) -> str | None:
    # PostgreSQL text cannot hold NUL; SQLite and the in-memory store keep it. U+FFFD marks
    # where one was rather than failing the whole memorize.
    return None if text is None else text.replace("\x00", "\ufffd")


def _pg_vector(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float32)


def _lock_scopes(conn: Conn, scopes: set[tuple[str, ...]]) -> None:
    """Hold each scope until the transaction ends. Item writes of one scope then run one
    after the other: read committed would otherwise let two writers read the same centroid
    sums (or miss each other's row of the same item) and lose one's change. Taken in one
    sorted order; a deadlock anyway is retried by :meth:`PostgresLayerStore.atomically`."""
    for scope_key in sorted(scopes):
        name = "\x1f".join(["layer_category_sum", *scope_key])
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [name])


class PostgresLayerStore:
    """The layer port on one PostgreSQL database (``postgresql://…``) with pgvector."""

    backend = "postgres"

    def __init__(
        self,
        url: str | DatabaseURL,
        *,
        vectors: bool = True,
        pool_size: int = 4,
        exact_below: int = EXACT_BELOW,
    ) -> None:
        parsed = parse_database_url(url) if isinstance(url, str) else url
        if parsed.backend != "postgresql":
            raise ConfigError(
                f"{parsed.redacted()} is not a PostgreSQL URL",
                hint="use postgresql://user@host:5432/dbname",
            )
        self.url = parsed
        self.vector_capable = vectors
        self._db = PgDatabase(parsed, pool_size=pool_size)
        self._fields: tuple[str, ...] = ()
        self._dimension: int | None = None
        self.exact_below = exact_below  # scope ranges with fewer vectors are scored exactly
        self._local = threading.local()  # the connection of this thread's atomically() block
        self._grown = 0  # items this process added since its last ANALYZE (or since opening)
        self._analyze_lock = threading.Lock()
        self._lease_table = False  # created (if missing) on the first claim

    @property
    def location(self) -> str:
        """The database, password redacted (what the service records and shows)."""
        return self.url.redacted()

    # -- plumbing ----------------------------------------------------------------------------

    def _run(self, work: Callable[[Conn], T], *, write: bool, transaction: bool = True) -> T:
        pinned: Conn | None = getattr(self._local, "conn", None)
        if pinned is not None:
            return work(pinned)
        return self._db.run_sync(work, write=write, transaction=transaction)

    def _write(self, work: Callable[[Conn], T]) -> T:
        return self._run(work, write=True)

    def _read(self, sql: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[Any]:
        # One statement: autocommit, no BEGIN / COMMIT round trips. binary: vectors arrive as
        # float32 bytes instead of text to parse.
        return self._run(
            lambda c: list(c.cursor(binary=binary).execute(sql, list(params)).fetchall()),
            write=False,
            transaction=False,
        )

    def atomically(self, work: Callable[[], T]) -> T:
        """``work()`` with every call it makes on this store in one transaction on one
        connection (rerun whole on a deadlock or a dropped connection; nested calls join)."""
        if getattr(self._local, "conn", None) is not None:
            return work()

        before = self._dimension

        def body(conn: Conn) -> T:
            self._dimension = before  # a rerun after a rollback starts where the first did
            self._local.conn = conn
            try:
                return work()
            finally:
                self._local.conn = None

        try:
            result = self._db.run_sync(body, write=True)
        except BaseException:
            self._dimension = before  # a rolled-back first vector did not fix the column
            raise
        self._analyze_if_grown()  # the block's item writes are committed now
        return result

    def _note_growth(self, added: int) -> None:
        with self._analyze_lock:
            self._grown += added
        if getattr(self._local, "conn", None) is None:  # else: when atomically() commits
            self._analyze_if_grown()

    def _analyze_if_grown(self) -> None:
        """ANALYZE ``layer_item`` when this process's writes grew it substantially."""
        with self._analyze_lock:
            if self._grown < ANALYZE_MIN_ROWS:
                return
            rows = self._read("SELECT reltuples FROM pg_class WHERE oid = 'layer_item'::regclass")
            if self._grown < ANALYZE_GROWTH * max(float(rows[0][0]), 0.0):
                return
            grown, self._grown = self._grown, 0
        try:
            self._db.run_sync(
                lambda c: c.execute("ANALYZE layer_item"), write=True, transaction=False
            )
        except MemoirError as exc:  # the write is committed; autovacuum analyses it later
            log.warning("ANALYZE layer_item failed", store=self.location, error=exc.message)
        else:
            log.debug("analysed layer_item after a write grew it", store=self.location, rows=grown)

    def _regclass(self, name: str) -> bool:
        rows = self._read("SELECT to_regclass(%s) IS NOT NULL", [name])
        return bool(rows[0][0])

    def _columns(self, table: str) -> list[str]:
        rows = self._read(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum",
            [table],
        )
        return [str(r[0]) for r in rows]

    # -- schema -----------------------------------------------------------------------------

    def provision(self, fields: Sequence[str], mode: DdlMode) -> None:
        fields = tuple(fields)
        if mode == "create":

            def create(conn: Conn) -> None:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                found = conn.execute(
                    "SELECT to_regclass(%s) IS NOT NULL", [centroids.SUMS_TABLE]
                ).fetchone()
                upgrade = not (found and found[0])
                for statement in layer_pg_ddl(fields):
                    conn.execute(statement.encode())
                if upgrade:  # a store from before the sums: fill them from its items
                    self._rebuild_sums(conn, fields)

            self._ensure_extension()
            self._ensure_meta_table()
            self._write(create)
            self._lease_table = True
        if self._regclass("layer_item") and not self._regclass(centroids.SUMS_TABLE):
            raise SchemaError(
                f"ddl_mode='validate' but {self.location} predates the category centroid sums "
                f"(table {centroids.SUMS_TABLE!r}, layer ddl_version 2)",
                hint="open it once with ddl_mode='create': that adds the table and fills it "
                "from the stored items",
            )
        for table in sql.SCOPED_TABLES:
            if not self._regclass(table):
                raise SchemaError(
                    f"ddl_mode='validate' but table {table!r} is missing from {self.location}",
                    hint="create the service once with ddl_mode='create'",
                )
            head = self._columns(table)[: len(fields)]
            if tuple(head) != fields:
                raise SchemaError(
                    f"table {table!r} in {self.location} has scope columns {head}, "
                    f"the scope model declares {list(fields)}",
                    hint="use the scope model the database was created with, or a new database",
                )
        self._fields = fields
        self._dimension = self._stored_dimension()

    def _rebuild_sums(self, conn: Conn, fields: Sequence[str]) -> None:
        rows = (
            conn.cursor(binary=True)
            .execute(
                f"SELECT {sql.scope_columns(fields)}, category_key, confidence, embedding "
                "FROM layer_item WHERE status = 'active' AND category_key IS NOT NULL"
            )
            .fetchall()
        )
        n = len(fields)
        centroids.rebuild_sums(
            conn,
            fields,
            "%s",
            (
                (
                    tuple(r[:n]),
                    str(r[n]),
                    float(r[n + 1]),
                    None if r[n + 2] is None else _pg_vector(r[n + 2]),
                )
                for r in rows
            ),
        )

    def _ensure_extension(self) -> None:
        def create(conn: Conn) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")

        try:
            self._write(create)
        except Exception as exc:
            if "vector" not in str(exc) and "extension" not in str(exc):
                raise
            raise SchemaError(
                f"PostgreSQL at {self.location} has no pgvector extension: "
                f"{str(exc).strip().splitlines()[0]}",
                hint="install pgvector on the server (the postgresql-<version>-pgvector package) "
                "and let the URL's user run CREATE EXTENSION vector, or use the sqlite provider",
            ) from exc

    def _stored_dimension(self) -> int | None:
        rows = self._read(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('layer_item') "
            "AND attname = 'embedding'"
        )
        return int(rows[0][0]) if rows and int(rows[0][0]) > 0 else None

    def _fix_dimension(self, dimension: int) -> None:
        """Type the embedding column at ``dimension`` and build its HNSW index (first vector)."""

        def work(conn: Conn) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            row = conn.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'layer_item'::regclass "
                "AND attname = 'embedding'"
            ).fetchone()
            if row is not None and int(row[0]) > 0:
                return  # another process got here first
            conn.execute(
                f"ALTER TABLE layer_item ALTER COLUMN embedding TYPE vector({int(dimension)})"
            )
            conn.execute(
                "CREATE INDEX IF NOT EXISTS layer_item_hnsw ON layer_item "
                "USING hnsw (embedding vector_ip_ops)"
            )

        self._write(work)
        self._dimension = self._stored_dimension()

    def _vector(self, vector: np.ndarray) -> PgVector:
        array = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._dimension is None:
            self._fix_dimension(int(array.shape[0]))
        if array.shape[0] != self._dimension:
            raise ConfigError(
                f"an embedding has {array.shape[0]} dimensions but the layer's vectors in "
                f"{self.location} have {self._dimension}",
                hint="open the layer with the embedder it was created with "
                "(service_meta records it), or use a new database",
            )
        return PgVector(array)

    def _ensure_meta_table(self) -> None:
        self._write(lambda c: c.execute(sql.META_TABLE_DDL))

    def get_meta(self) -> dict[str, Any] | None:
        if not self._regclass("layer_meta"):
            return None
        return sql.meta_value(self._read(sql.get_meta_sql()))

    def set_meta(self, meta: Mapping[str, Any]) -> None:
        self._ensure_meta_table()
        self._write(lambda c: c.execute(sql.set_meta_sql("%s"), [sql.meta_param(meta)]))

    def _cols(self) -> str:
        return sql.scope_columns(self._fields)

    def _marks(self, extra: int) -> str:
        return sql.marks("%s", len(self._fields) + extra)

    # -- resources --------------------------------------------------------------------------

    def find_resource(
        self, scope: ScopeValues, content_hash: str, revision: int
    ) -> ResourceRow | None:
        where, params = pg_scope_where({k: (v,) for k, v in scope.items()})
        rows = self._read(
            f"SELECT {self._cols()}, {sql.RESOURCE_COLUMNS} FROM layer_resource "
            f"WHERE {where} AND content_hash = %s AND pipeline_revision = %s",
            [*params, content_hash, revision],
        )
        return sql.resource_row(self._fields, rows[0]) if rows else None

    def add_resource(self, row: ResourceRow) -> None:
        self._write(
            lambda c: c.execute(
                f"INSERT INTO layer_resource ({self._cols()}, {sql.RESOURCE_COLUMNS}) "
                f"VALUES ({self._marks(10)}) ON CONFLICT DO NOTHING",
                sql.resource_params(self._fields, row, _clean),
            )
        )

    # -- items ------------------------------------------------------------------------------

    def upsert_items(self, rows: Sequence[ItemRow]) -> None:
        if not rows:
            return
        values = []
        for row in rows:
            text = _clean(row.text) or ""
            tsv, length = tsvector_literal(text)
            vector = None if row.embedding is None else self._vector(row.embedding)
            values.append([*sql.item_values(self._fields, row, text, vector), tsv, length])
        statement = (
            f"INSERT INTO layer_item ({self._cols()}, {sql.ITEM_COLUMNS}, tsv, lex_len) "
            f"VALUES ({self._marks(14)}) ON CONFLICT (item_id) DO UPDATE SET "
            "text=excluded.text, evidence=excluded.evidence, confidence=excluded.confidence, "
            "stability=excluded.stability, version=excluded.version, "
            "category_key=excluded.category_key, status=excluded.status, "
            "embedding=excluded.embedding, tsv=excluded.tsv, lex_len=excluded.lex_len, "
            "updated_at=excluded.updated_at"
        )
        ids = [row.item_id for row in rows]

        def work(conn: Conn) -> int:
            _lock_scopes(conn, {tuple(row.scope[f] for f in self._fields) for row in rows})
            before = {
                str(r[0]): (r[1], r[2] == "active", None if r[3] is None else _pg_vector(r[3]))
                for r in conn.cursor(binary=True)
                .execute(
                    "SELECT item_id, category_key, status, embedding FROM layer_item "
                    "WHERE item_id = ANY(%s::text[])",
                    [ids],
                )
                .fetchall()
            }
            changes: list[tuple[tuple[str, ...], Membership | None, ItemRow]] = [
                (tuple(row.scope[f] for f in self._fields), before.get(row.item_id), row)
                for row in rows
            ]
            conn.cursor().executemany(statement, values)
            centroids.sync_sums(conn, self._fields, "%s", changes)
            return len(set(ids) - set(before))

        self._note_growth(self._write(work))

    def _item_select(self) -> str:
        return f"SELECT {self._cols()}, {sql.ITEM_COLUMNS} FROM layer_item"

    def _item(self, row: Sequence[Any]) -> ItemRow:
        return sql.item_row(self._fields, row, _pg_vector)

    def items(
        self,
        selector: ScopeFilter,
        *,
        status: str | None = "active",
        limit: int | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[ItemRow]:
        where, params = pg_scope_where(selector)
        query = f"{self._item_select()} WHERE {where}"
        if status is not None:
            query += " AND status = %s"
            params.append(status)
        if categories is not None:
            query += " AND category_key = ANY(%s::text[])"
            params.append(list(categories))
        query += " ORDER BY created_at, item_id"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        return [self._item(r) for r in self._read(query, params, binary=True)]

    def items_by_id(self, item_ids: Sequence[str]) -> list[ItemRow]:
        if not item_ids:
            return []
        found = {
            row.item_id: row
            for row in (
                self._item(r)
                for r in self._read(
                    f"{self._item_select()} WHERE item_id = ANY(%s::text[])",
                    [list(item_ids)],
                    binary=True,
                )
            )
        }
        return [found[i] for i in item_ids if i in found]

    def count_items(self, selector: ScopeFilter) -> int:
        where, params = pg_scope_where(selector)
        rows = self._read(
            f"SELECT count(*) FROM layer_item WHERE {where} AND status = 'active'", params
        )
        return int(rows[0][0])

    def category_members(self, scope: ScopeValues, keys: Sequence[str]) -> list[MemberRow]:
        if not keys:
            return []
        pinned: Conn | None = getattr(self._local, "conn", None)
        if pinned is not None:  # a refresh that will rewrite these categories' sums
            _lock_scopes(pinned, {tuple(scope[f] for f in self._fields)})
        where, params = pg_scope_where({f: (scope[f],) for f in self._fields})
        rows = self._read(
            "SELECT item_id, category_key, text, confidence, embedding FROM layer_item "
            f"WHERE {where} AND category_key = ANY(%s::text[]) AND status = 'active' "
            "ORDER BY created_at, item_id",
            [*params, list(keys)],
            binary=True,
        )
        return [
            MemberRow(
                str(r[0]), str(r[1]), r[2], r[3],
                None if r[4] is None else np.asarray(r[4], dtype=np.float32),
            )
            for r in rows
        ]  # fmt: skip

    def category_sums(self, scope: ScopeValues, keys: Sequence[str]) -> dict[str, CategorySums]:
        scope_key = [scope[f] for f in self._fields]
        return self._run(
            lambda c: centroids.read_sums(c, self._fields, "%s", scope_key, keys),
            write=False,
            transaction=False,
        )

    def put_category_sums(self, scope: ScopeValues, sums: Mapping[str, CategorySums]) -> None:
        scope_key = [scope[f] for f in self._fields]
        self._write(lambda c: centroids.write_sums(c, self._fields, "%s", scope_key, sums))

    def vector_search(
        self, selector: ScopeFilter, vector: np.ndarray, k: int
    ) -> list[tuple[str, float]]:
        return self.vector_search_many(selector, [vector], k)[0]

    def vector_search_many(
        self, selector: ScopeFilter, vectors: Sequence[np.ndarray], k: int
    ) -> list[list[tuple[str, float]]]:
        if k <= 0 or self._dimension is None or not vectors:
            return [[] for _ in vectors]
        queries = [self._vector(v) for v in vectors]
        where, params = pg_scope_where(selector)
        source = f"FROM layer_item WHERE {where} AND status = 'active' AND embedding IS NOT NULL"

        def search(conn: Conn) -> list[list[Any]]:
            row = conn.execute(
                f"SELECT count(*) FROM (SELECT 1 {source} LIMIT {int(self.exact_below)}) AS m",
                params,
            ).fetchone()
            exact = row is not None and int(row[0]) < self.exact_below
            if not exact:
                conn.execute(
                    "SET LOCAL hnsw.iterative_scan = 'relaxed_order'; "
                    f"SET LOCAL hnsw.ef_search = {max(_EF_SEARCH, min(1000, 4 * int(k)))}"
                )
            found = []
            for query in queries:
                if not exact:
                    rows = conn.execute(
                        f"SELECT item_id, embedding <#> %s AS distance {source} "
                        "ORDER BY embedding <#> %s LIMIT %s",
                        (query, *params, query, int(k)),
                    ).fetchall()
                    if len(rows) >= k:
                        found.append(rows)
                        continue
                # ``+ 0`` keeps the planner off the HNSW index: every row of the range is scored.
                found.append(
                    conn.execute(
                        f"SELECT item_id, (embedding <#> %s) + 0 AS distance {source} "
                        "ORDER BY distance, item_id LIMIT %s",
                        (query, *params, int(k)),
                    ).fetchall()
                )
            return found

        out = []
        for rows in self._run(search, write=False):
            ranked = sorted((float(r[1]), str(r[0])) for r in rows)
            out.append([(item_id, -distance) for distance, item_id in ranked])
        return out

    def lexical_search(
        self, selector: ScopeFilter, terms: Sequence[str], k: int
    ) -> list[tuple[str, float]]:
        lexemes = list(
            dict.fromkeys(t for term in terms for t in lexical_tokens(term) if _usable(t))
        )
        if not lexemes or k <= 0:
            return []
        where, params = pg_scope_where(selector)
        tsquery = " | ".join(_lexeme(t) for t in lexemes)
        rows = self._read(
            "WITH st AS (SELECT count(*)::float8 AS n, "
            "greatest(coalesce(avg(lex_len), 0)::float8, 1e-9) AS avgdl "
            f"FROM layer_item WHERE {where} AND status = 'active'), "
            "hit AS MATERIALIZED (SELECT item_id, lex_len, tsv FROM layer_item "
            f"WHERE tsv @@ %s::tsquery AND {where} AND status = 'active'), "
            "tf AS (SELECT hit.item_id, hit.lex_len, u.lexeme, "
            "coalesce(array_length(u.positions, 1), 1)::float8 AS tf "
            "FROM hit CROSS JOIN LATERAL unnest(hit.tsv) AS u WHERE u.lexeme = ANY(%s::text[])), "
            "df AS (SELECT lexeme, count(*)::float8 AS df FROM tf GROUP BY lexeme) "
            "SELECT tf.item_id, sum(ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * tf.tf * %s "
            "/ (tf.tf + %s * (1 - %s + %s * tf.lex_len / st.avgdl))) AS score "
            "FROM tf JOIN df USING (lexeme) CROSS JOIN st "
            "GROUP BY tf.item_id ORDER BY score DESC, tf.item_id LIMIT %s",
            [*params, tsquery, *params, lexemes, _K1 + 1, _K1, _B, _B, int(k)],
        )
        return [(str(r[0]), float(r[1])) for r in rows]

    # -- categories, intentions -------------------------------------------------------------

    def upsert_categories(self, rows: Sequence[CategoryRow]) -> None:
        if not rows:
            return
        statement = (
            f"INSERT INTO layer_category ({self._cols()}, {sql.CATEGORY_COLUMNS}) "
            f"VALUES ({self._marks(7)}) "
            f"ON CONFLICT ({self._cols()}, category_key) DO UPDATE SET name=excluded.name, "
            "description=excluded.description, summary=excluded.summary, "
            "anchor_ids=excluded.anchor_ids, item_count=excluded.item_count, "
            "updated_at=excluded.updated_at"
        )
        values = [sql.category_params(self._fields, row, _clean) for row in rows]
        self._write(lambda c: c.cursor().executemany(statement, values))

    def categories(self, selector: ScopeFilter) -> list[CategoryRow]:
        where, params = pg_scope_where(selector)
        rows = self._read(
            f"SELECT {self._cols()}, {sql.CATEGORY_COLUMNS} FROM layer_category WHERE {where} "
            f"ORDER BY {self._cols()}, category_key",
            params,
        )
        return [sql.category_row(self._fields, row) for row in rows]

    def add_intention(self, row: IntentionRow) -> None:
        self._write(
            lambda c: c.execute(
                f"INSERT INTO layer_intention ({self._cols()}, {sql.INTENTION_COLUMNS}) "
                f"VALUES ({self._marks(6)})",
                sql.intention_params(self._fields, row),
            )
        )

    def latest_intentions(self, selector: ScopeFilter) -> list[IntentionRow]:
        where, params = pg_scope_where(selector)
        rows = self._read(
            f"SELECT DISTINCT ON ({self._cols()}) {self._cols()}, {sql.INTENTION_COLUMNS} "
            f"FROM layer_intention WHERE {where} ORDER BY {self._cols()}, version DESC",
            params,
        )
        return [sql.intention_row(self._fields, row) for row in rows]

    # -- revisions, runs --------------------------------------------------------------------

    def add_revision(self, row: RevisionRow) -> None:
        self._write(
            lambda c: c.execute(
                sql.revision_insert("%s"),
                [row.revision, _clean(row.change), json.dumps(row.pipelines), row.created_at],
            )
        )

    def revisions(self) -> list[RevisionRow]:
        return [sql.revision_row(r) for r in self._read(sql.REVISION_SELECT)]

    def add_run(self, row: RunRow) -> None:
        self._write(
            lambda c: c.execute(
                sql.run_insert("%s"), [row.run_id, row.kind, json.dumps(row.body), row.created_at]
            )
        )

    def runs(self, limit: int = 50) -> list[RunRow]:
        return [
            sql.run_row(r)
            for r in self._read(
                f"SELECT {sql.RUN_COLUMNS} FROM layer_run "
                "ORDER BY created_at DESC, seq DESC LIMIT %s",
                [limit],
            )
        ]

    def finished_run(self, kind: str, runner_run_id: str) -> RunRow | None:
        rows = self._read(
            f"SELECT {sql.RUN_COLUMNS} FROM layer_run WHERE kind = %s "
            "AND body::jsonb ->> 'runner_run_id' = %s AND body::jsonb ->> 'status' = 'ok' "
            "ORDER BY created_at DESC, seq DESC LIMIT 1",
            [kind, runner_run_id],
        )
        return sql.run_row(rows[0]) if rows else None

    # -- leases -----------------------------------------------------------------------------

    def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        if not self._lease_table:
            # a store provisioned before leases, or opened in validate mode, has no table yet
            def create(conn: Conn) -> None:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                conn.execute(LEASE_TABLE_DDL.format(real="DOUBLE PRECISION").encode())

            self._write(create)
            self._lease_table = True

        def work(conn: Conn) -> bool:
            conn.execute(lease_claim_sql("postgres").encode(), [name, holder, ttl_s])
            row = conn.execute(lease_holder_sql("postgres").encode(), [name]).fetchone()
            return row is not None and row[0] == holder

        return self._write(work)

    def release_lease(self, name: str, holder: str) -> None:
        self._write(lambda c: c.execute(lease_release_sql("postgres").encode(), [name, holder]))

    def close(self) -> None:
        self._db.close_all()
