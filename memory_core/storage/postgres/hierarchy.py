"""The category hierarchy on PostgreSQL: ``memoir_category``, ``memoir_chunk``, ``memoir_run``.

Implements :class:`memory_core.hierarchy.store.HierarchyStore` with the same rules and the same
orders as the SQLite store: level-1 categories have no parent, deeper ones a parent exactly one
level up in the same scope; names are unique per parent by their normalised form (a unique
index, so concurrent creators converge on one row); chunks link only to leaf categories and are
idempotent on ``uid``; chunks come back ordered by (created_at, uid), keyset-paginated.
All SQL is parameterised.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import psycopg
import structlog

from memory_core.errors import InvalidInputError, SchemaError
from memory_core.hierarchy.store import (
    CATEGORY_COLUMNS,
    CHUNK_COLUMNS,
    RUN_COLUMNS,
    Category,
    HierarchyChunk,
    HierarchyStore,
    NewChunk,
    category_from_row,
    check_category_level,
    check_category_name,
    check_leaf_row,
    check_parent_row,
    chunk_from_row,
    normalise_category_name,
    run_from_row,
    vector_blobs,
)
from memory_core.models import utc_now
from memory_core.storage.postgres.connection import PostgresConnection
from memory_core.storage.postgres.schema import SCHEMA_LOCK_KEY, SCHEMA_STATEMENTS, SCHEMA_VERSION
from memory_core.storage.url import DatabaseURL

__all__ = ["PostgresHierarchyStore"]

log = structlog.get_logger(__name__)


Conn = psycopg.AsyncConnection[Any]


def _no_nul(value: str | None, what: str) -> None:
    # PostgreSQL text cannot hold U+0000; say so plainly instead of a driver error.
    if value is not None and "\x00" in value:
        raise InvalidInputError(
            f"the {what} contains a NUL character, which PostgreSQL text cannot store",
            hint="remove NUL (\\x00) characters from the input",
        )


class PostgresHierarchyStore(HierarchyStore):
    """Categories, leaf-linked chunks and query runs in PostgreSQL (psycopg 3, async).

    Args:
        url: a ``postgresql://user[:password]@host:port/dbname`` URL.
        depth: the configured hierarchy depth (1–100); chunks link only to categories at it.
        retries: reconnect attempts (exponential backoff) after the connection drops.
    """

    backend = "postgresql"

    def __init__(self, url: DatabaseURL, *, depth: int, retries: int = 3) -> None:
        if not 1 <= depth <= 100:
            raise InvalidInputError(
                f"hierarchy depth {depth} is outside 1..100", hint="set hierarchy.depth to 1..100"
            )
        self.url = url
        self.depth = depth
        self.connection = PostgresConnection(url, retries=retries)

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> PostgresHierarchyStore:
        """Connect and create the tables and indexes if they do not exist (idempotent).

        Raises:
            DatabaseUnavailableError: the server cannot be reached (with what to check).
            SchemaError: the tables were created by a newer memoir.
        """
        await self.connection.connect()
        version = await self.connection.run(_create_schema, write=True)
        if version > SCHEMA_VERSION:
            await self.connection.close()
            raise SchemaError(
                f"the hierarchy tables in {self.url.redacted()} are at schema version {version}, "
                f"newer than this memoir ({SCHEMA_VERSION})",
                hint="upgrade memoir (pip install -U memoir-mcp)",
            )
        log.debug("postgres hierarchy store open", url=self.url.redacted(), depth=self.depth)
        return self

    async def close(self) -> None:
        await self.connection.close()

    async def __aenter__(self) -> PostgresHierarchyStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- categories ------------------------------------------------------------------------

    async def categories(
        self, scope: str, *, parent_id: int | None, level: int | None = None
    ) -> list[Category]:
        """Children of ``parent_id`` (None: level-1 categories), by normalised name.

        ``level``, when given, is an extra filter (as in the SQLite store).
        """
        where = ["scope = %s", "parent_id IS NULL" if parent_id is None else "parent_id = %s"]
        params: list[Any] = [scope] if parent_id is None else [scope, parent_id]
        if level is not None:
            where.append("level = %s")
            params.append(level)
        sql = (
            f"SELECT {CATEGORY_COLUMNS} FROM memoir_category WHERE {' AND '.join(where)} "
            "ORDER BY norm_name, category_id"
        )

        async def read(conn: Conn) -> list[Category]:
            cur = await conn.execute(sql, params)
            return [category_from_row(row) for row in await cur.fetchall()]

        return await self.connection.run(read)

    async def all_categories(self, scope: str) -> list[Category]:
        """Every category of the scope, by level, parent, then normalised name."""

        async def read(conn: Conn) -> list[Category]:
            cur = await conn.execute(
                f"SELECT {CATEGORY_COLUMNS} FROM memoir_category WHERE scope = %s "
                "ORDER BY level, COALESCE(parent_id, 0), norm_name, category_id",
                (scope,),
            )
            return [category_from_row(row) for row in await cur.fetchall()]

        return await self.connection.run(read)

    async def count_categories(self, scope: str) -> int:
        async def read(conn: Conn) -> int:
            cur = await conn.execute(
                "SELECT count(*) FROM memoir_category WHERE scope = %s", (scope,)
            )
            row = await cur.fetchone()
            return int(row[0]) if row else 0

        return await self.connection.run(read)

    async def create_category(
        self, scope: str, *, parent_id: int | None, level: int, name: str
    ) -> Category:
        """Create, or return the existing category whose normalised name matches within the
        same parent (no twins, even under concurrent creators).

        Raises:
            InvalidInputError: the level/parent combination is invalid, or the name is empty.
        """
        display = check_category_name(name)
        norm = normalise_category_name(display)
        check_category_level(level, parent_id, self.depth)
        _no_nul(display, "category name")

        async def write(conn: Conn) -> Category:
            if parent_id is not None:
                cur = await conn.execute(
                    "SELECT scope, level FROM memoir_category WHERE category_id = %s",
                    (parent_id,),
                )
                check_parent_row(await cur.fetchone(), scope, parent_id, level)
            cur = await conn.execute(
                "INSERT INTO memoir_category (scope, parent_id, level, name, norm_name, "
                "created_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING "
                f"RETURNING {CATEGORY_COLUMNS}",
                (scope, parent_id, level, display, norm, utc_now()),
            )
            row = await cur.fetchone()
            if row is None:  # a twin exists (perhaps created a moment ago by another writer)
                cur = await conn.execute(
                    f"SELECT {CATEGORY_COLUMNS} FROM memoir_category WHERE scope = %s "
                    "AND COALESCE(parent_id, 0) = %s AND norm_name = %s",
                    (scope, parent_id or 0, norm),
                )
                row = await cur.fetchone()
                assert row is not None  # the unique index said it is there
            return category_from_row(row)

        return await self.connection.run(write, write=True)

    # -- chunks ----------------------------------------------------------------------------

    async def add_chunks(
        self,
        scope: str,
        category_id: int,
        chunks: Sequence[NewChunk],
        vectors: Any | None = None,
    ) -> list[int]:
        """Link chunks to a leaf category (idempotent on ``uid``); returns chunk ids in order.

        A chunk whose uid is already stored is left as it is and its existing id returned.

        Raises:
            InvalidInputError: ``category_id`` is not a leaf of this scope at the configured
                depth, or ``vectors`` does not have one row per chunk.
        """
        blobs = vector_blobs(vectors, len(chunks))
        for chunk in chunks:
            _no_nul(chunk.text, "chunk text")
            _no_nul(chunk.source, "chunk source")
        rows = [
            (
                chunk.uid,
                scope,
                category_id,
                chunk.text,
                chunk.token_count,
                chunk.content_hash,
                chunk.created_at,
                chunk.source,
                json.dumps(chunk.metadata, sort_keys=True),
                blob,
            )
            for chunk, blob in zip(chunks, blobs, strict=True)
        ]

        in_uid_order = sorted(rows, key=lambda row: row[0])

        async def write(conn: Conn) -> list[int]:
            cur = await conn.execute(
                "SELECT scope, level FROM memoir_category WHERE category_id = %s", (category_id,)
            )
            check_leaf_row(await cur.fetchone(), scope, category_id, self.depth)
            if not rows:
                return []
            async with conn.cursor() as cursor:
                # Rows go in uid order so concurrent writers take the unique-index locks in the
                # same order and cannot deadlock each other.
                await cursor.executemany(
                    "INSERT INTO memoir_chunk (uid, scope, category_id, text, token_count, "
                    "content_hash, created_at, source, metadata, embedding) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (uid) DO NOTHING",
                    in_uid_order,
                )
            uids = [row[0] for row in rows]
            cur = await conn.execute(
                "SELECT uid, chunk_id FROM memoir_chunk WHERE uid = ANY(%s)", (uids,)
            )
            ids = {uid: int(chunk_id) for uid, chunk_id in await cur.fetchall()}
            return [ids[uid] for uid in uids]

        return await self.connection.run(write, write=True)

    async def chunks_in_category(
        self,
        scope: str,
        category_id: int,
        *,
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[HierarchyChunk]:
        """Chunks of one category, created_at ascending then uid; ``after`` is the
        (created_at, uid) of the last chunk already read (keyset pagination)."""
        limit = max(1, int(limit))  # as the SQLite store: a page is never empty by request
        if after is None:
            sql = (
                f"SELECT {CHUNK_COLUMNS} FROM memoir_chunk WHERE category_id = %s "
                "AND scope = %s ORDER BY created_at, uid LIMIT %s"
            )
            params: tuple[Any, ...] = (category_id, scope, limit)
        else:
            sql = (
                f"SELECT {CHUNK_COLUMNS} FROM memoir_chunk WHERE category_id = %s "
                "AND scope = %s AND (created_at, uid) > (%s, %s) "
                "ORDER BY created_at, uid LIMIT %s"
            )
            params = (category_id, scope, after[0], after[1], limit)

        async def read(conn: Conn) -> list[HierarchyChunk]:
            cur = await conn.execute(sql, params)
            return [chunk_from_row(row) for row in await cur.fetchall()]

        return await self.connection.run(read)

    async def existing_chunks(self, scope: str, uids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Chunks already stored, by uid: (chunk id, category id). Lets re-ingest skip the LLM."""
        wanted = list(dict.fromkeys(uids))
        if not wanted:
            return {}

        async def read(conn: Conn) -> dict[str, tuple[int, int]]:
            cur = await conn.execute(
                "SELECT uid, chunk_id, category_id FROM memoir_chunk "
                "WHERE scope = %s AND uid = ANY(%s)",
                (scope, wanted),
            )
            return {uid: (int(cid), int(cat)) for uid, cid, cat in await cur.fetchall()}

        return await self.connection.run(read)

    async def chunk_counts(self, scope: str) -> dict[int, int]:
        """Chunks per category id (for the category tree)."""

        async def read(conn: Conn) -> dict[int, int]:
            cur = await conn.execute(
                "SELECT category_id, count(*) FROM memoir_chunk WHERE scope = %s "
                "GROUP BY category_id",
                (scope,),
            )
            return {int(cid): int(n) for cid, n in await cur.fetchall()}

        return await self.connection.run(read)

    # -- runs ------------------------------------------------------------------------------

    async def record_run(
        self, scope: str, kind: str, took_ms: float, payload: dict[str, Any]
    ) -> int:
        """Store one query run (strategy, paths, budget, usage, latency…); returns its id."""
        body = json.dumps(payload, sort_keys=True, default=str)

        async def write(conn: Conn) -> int:
            cur = await conn.execute(
                "INSERT INTO memoir_run (scope, kind, started_at, took_ms, payload) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING run_id",
                (scope, kind, utc_now(), took_ms, body),
            )
            row = await cur.fetchone()
            assert row is not None
            return int(row[0])

        return await self.connection.run(write, write=True)

    async def list_runs(
        self, scope: str, *, kind: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        """The latest runs first: run_id, scope, kind, started_at, took_ms, payload."""
        limit = max(1, int(limit))  # as the SQLite store: a page is never empty by request
        where = "scope = %s" + (" AND kind = %s" if kind is not None else "")
        params: tuple[Any, ...] = (scope, kind, limit) if kind is not None else (scope, limit)

        async def read(conn: Conn) -> list[dict[str, Any]]:
            cur = await conn.execute(
                f"SELECT {RUN_COLUMNS} FROM memoir_run WHERE {where} ORDER BY run_id DESC LIMIT %s",
                params,
            )
            return [run_from_row(row) for row in await cur.fetchall()]

        return await self.connection.run(read)

    # -- maintenance (not in the protocol) -------------------------------------------------

    async def delete_scope(self, scope: str) -> int:
        """Remove every chunk, category and run of ``scope``; returns the rows removed."""

        async def write(conn: Conn) -> int:
            removed = 0
            for sql in (
                "DELETE FROM memoir_chunk WHERE scope = %s",
                "DELETE FROM memoir_run WHERE scope = %s",
            ):
                cur = await conn.execute(sql, (scope,))
                removed += cur.rowcount
            # Children before parents: the parent reference is a plain foreign key.
            cur = await conn.execute(
                "SELECT COALESCE(max(level), 0) FROM memoir_category WHERE scope = %s", (scope,)
            )
            row = await cur.fetchone()
            for level in range(int(row[0]) if row else 0, 0, -1):
                cur = await conn.execute(
                    "DELETE FROM memoir_category WHERE scope = %s AND level = %s", (scope, level)
                )
                removed += cur.rowcount
            return removed

        return await self.connection.run(write, write=True)


async def _create_schema(conn: Conn) -> int:
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
    for statement in SCHEMA_STATEMENTS:
        await conn.execute(statement)
    await conn.execute(
        "INSERT INTO memoir_schema (version, applied_at) VALUES (%s, %s) "
        "ON CONFLICT (version) DO NOTHING",
        (SCHEMA_VERSION, utc_now()),
    )
    cur = await conn.execute("SELECT max(version) FROM memoir_schema")
    row = await cur.fetchone()
    return int(row[0]) if row and row[0] is not None else SCHEMA_VERSION
