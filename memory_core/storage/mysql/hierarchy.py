"""The category hierarchy on MySQL / MariaDB: ``memoir_category``, ``memoir_chunk``, ``memoir_run``.

Implements :class:`memory_core.hierarchy.store.HierarchyStore` with the same rules and orders as
the SQLite and PostgreSQL stores: level-1 categories have no parent, deeper ones a parent
exactly one level up in the same scope; names are unique per parent by their normalised form
(a unique index, so concurrent creators converge on one row); chunks link only to leaf
categories and are idempotent on ``uid``; chunks come back ordered by (created_at, uid),
keyset-paginated. All SQL is parameterised (PyMySQL escapes every value).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

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
from memory_core.storage.mysql.connection import MysqlConnection
from memory_core.storage.mysql.schema import SCHEMA_LOCK_NAME, SCHEMA_VERSION, schema_statements
from memory_core.storage.url import DatabaseURL

__all__ = ["MysqlHierarchyStore"]

log = structlog.get_logger(__name__)


_SCHEMA_LOCK_TIMEOUT_S = 30
_MAX_UID = 255


def _name_key(norm_name: str) -> bytes:
    return hashlib.sha256(norm_name.encode("utf-8")).digest()


class MysqlHierarchyStore(HierarchyStore):
    """Categories, leaf-linked chunks and query runs in MySQL / MariaDB (PyMySQL in a thread).

    Args:
        url: a ``mysql://user[:password]@host:port/dbname`` URL (``mariadb://`` works too).
        depth: the configured hierarchy depth (1–100); chunks link only to categories at it.
        retries: reconnect attempts (exponential backoff) after the connection drops.
    """

    backend = "mysql"

    def __init__(self, url: DatabaseURL, *, depth: int, retries: int = 3) -> None:
        if not 1 <= depth <= 100:
            raise InvalidInputError(
                f"hierarchy depth {depth} is outside 1..100", hint="set hierarchy.depth to 1..100"
            )
        self.url = url
        self.depth = depth
        self.connection = MysqlConnection(url, retries=retries)

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> MysqlHierarchyStore:
        """Connect and create the tables and indexes if they do not exist (idempotent).

        Raises:
            DatabaseUnavailableError: the server cannot be reached (with what to check).
            SchemaError: the tables were created by a newer memoir.
        """
        await self.connection.connect()
        version = await self.connection.run(_create_schema)
        if version > SCHEMA_VERSION:
            await self.connection.close()
            raise SchemaError(
                f"the hierarchy tables in {self.url.redacted()} are at schema version {version}, "
                f"newer than this memoir ({SCHEMA_VERSION})",
                hint="upgrade memoir (pip install -U memoir-mcp)",
            )
        log.debug("mysql hierarchy store open", url=self.url.redacted(), depth=self.depth)
        return self

    async def close(self) -> None:
        await self.connection.close()

    async def __aenter__(self) -> MysqlHierarchyStore:
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

        def read(cursor: Any) -> list[Category]:
            cursor.execute(sql, params)
            return [category_from_row(row) for row in cursor.fetchall()]

        return await self.connection.run(read)

    async def all_categories(self, scope: str) -> list[Category]:
        """Every category of the scope, by level, parent, then normalised name."""

        def read(cursor: Any) -> list[Category]:
            cursor.execute(
                f"SELECT {CATEGORY_COLUMNS} FROM memoir_category WHERE scope = %s "
                "ORDER BY level, COALESCE(parent_id, 0), norm_name, category_id",
                (scope,),
            )
            return [category_from_row(row) for row in cursor.fetchall()]

        return await self.connection.run(read)

    async def count_categories(self, scope: str) -> int:
        def read(cursor: Any) -> int:
            cursor.execute("SELECT COUNT(*) FROM memoir_category WHERE scope = %s", (scope,))
            return int(cursor.fetchone()[0])

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
        key = _name_key(norm)

        def write(cursor: Any) -> Category:
            if parent_id is not None:
                cursor.execute(
                    "SELECT scope, level FROM memoir_category WHERE category_id = %s",
                    (parent_id,),
                )
                check_parent_row(cursor.fetchone(), scope, parent_id, level)
            # INSERT IGNORE would also hide CHECK and foreign-key failures; only the unique
            # key may be "ignored", so a no-op update on it is the idempotent form.
            cursor.execute(
                "INSERT INTO memoir_category (scope, parent_id, level, name, norm_name, name_key, "
                "created_at, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, '{}') "
                "ON DUPLICATE KEY UPDATE category_id = category_id",
                (scope, parent_id, level, display, norm, key, utc_now()),
            )
            cursor.execute(
                f"SELECT {CATEGORY_COLUMNS} FROM memoir_category WHERE scope = %s "
                "AND parent_key = %s AND name_key = %s",
                (scope, parent_id or 0, key),
            )
            row = cursor.fetchone()
            assert row is not None  # just inserted, or the unique key found its twin
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
                depth, a uid is longer than 255 characters, or ``vectors`` does not have one
                row per chunk.
        """
        blobs = vector_blobs(vectors, len(chunks))
        for chunk in chunks:
            if len(chunk.uid) > _MAX_UID:
                raise InvalidInputError(
                    f"chunk uid {chunk.uid[:40]!r}… is longer than {_MAX_UID} characters",
                    hint="derive uids with memory_core.models.stable_id()",
                )
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

        def write(cursor: Any) -> list[int]:
            cursor.execute(
                "SELECT scope, level FROM memoir_category WHERE category_id = %s", (category_id,)
            )
            check_leaf_row(cursor.fetchone(), scope, category_id, self.depth)
            if not rows:
                return []
            cursor.executemany(
                "INSERT INTO memoir_chunk (uid, scope, category_id, text, token_count, "
                "content_hash, created_at, source, metadata, embedding) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON DUPLICATE KEY UPDATE chunk_id = chunk_id",
                rows,
            )
            uids = list(dict.fromkeys(row[0] for row in rows))
            ids: dict[str, int] = {}
            # Bounded IN lists: a document can have thousands of chunks.
            for start in range(0, len(uids), 500):
                batch = uids[start : start + 500]
                marks = ", ".join(["%s"] * len(batch))
                cursor.execute(
                    f"SELECT uid, chunk_id FROM memoir_chunk WHERE uid IN ({marks})", batch
                )
                ids.update((uid, int(chunk_id)) for uid, chunk_id in cursor.fetchall())
            return [ids[row[0]] for row in rows]

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
            # Spelled out rather than a row comparison, which older MySQL cannot use an index for.
            sql = (
                f"SELECT {CHUNK_COLUMNS} FROM memoir_chunk WHERE category_id = %s "
                "AND scope = %s AND (created_at > %s OR (created_at = %s AND uid > %s)) "
                "ORDER BY created_at, uid LIMIT %s"
            )
            params = (category_id, scope, after[0], after[0], after[1], limit)

        def read(cursor: Any) -> list[HierarchyChunk]:
            cursor.execute(sql, params)
            return [chunk_from_row(row) for row in cursor.fetchall()]

        return await self.connection.run(read)

    async def existing_chunks(self, scope: str, uids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Chunks already stored, by uid: (chunk id, category id). Lets re-ingest skip the LLM."""
        wanted = list(dict.fromkeys(uids))

        def read(cursor: Any) -> dict[str, tuple[int, int]]:
            found: dict[str, tuple[int, int]] = {}
            for start in range(0, len(wanted), 500):  # bounded IN lists
                batch = wanted[start : start + 500]
                marks = ", ".join(["%s"] * len(batch))
                cursor.execute(
                    "SELECT uid, chunk_id, category_id FROM memoir_chunk "
                    f"WHERE scope = %s AND uid IN ({marks})",
                    (scope, *batch),
                )
                found.update((u, (int(c), int(k))) for u, c, k in cursor.fetchall())
            return found

        return await self.connection.run(read) if wanted else {}

    async def chunk_counts(self, scope: str) -> dict[int, int]:
        """Chunks per category id (for the category tree)."""

        def read(cursor: Any) -> dict[int, int]:
            cursor.execute(
                "SELECT category_id, COUNT(*) FROM memoir_chunk WHERE scope = %s "
                "GROUP BY category_id",
                (scope,),
            )
            return {int(cid): int(n) for cid, n in cursor.fetchall()}

        return await self.connection.run(read)

    # -- runs ------------------------------------------------------------------------------

    async def record_run(
        self, scope: str, kind: str, took_ms: float, payload: dict[str, Any]
    ) -> int:
        """Store one query run (strategy, paths, budget, usage, latency…); returns its id."""
        body = json.dumps(payload, sort_keys=True, default=str)

        def write(cursor: Any) -> int:
            cursor.execute(
                "INSERT INTO memoir_run (scope, kind, started_at, took_ms, payload) "
                "VALUES (%s, %s, %s, %s, %s)",
                (scope, kind, utc_now(), took_ms, body),
            )
            return int(cursor.lastrowid)

        return await self.connection.run(write, write=True)

    async def list_runs(
        self, scope: str, *, kind: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        """The latest runs first: run_id, scope, kind, started_at, took_ms, payload."""
        limit = max(1, int(limit))  # as the SQLite store: a page is never empty by request
        where = "scope = %s" + (" AND kind = %s" if kind is not None else "")
        params: tuple[Any, ...] = (scope, kind, limit) if kind is not None else (scope, limit)

        def read(cursor: Any) -> list[dict[str, Any]]:
            cursor.execute(
                f"SELECT {RUN_COLUMNS} FROM memoir_run WHERE {where} ORDER BY run_id DESC LIMIT %s",
                params,
            )
            return [run_from_row(row) for row in cursor.fetchall()]

        return await self.connection.run(read)

    # -- maintenance (not in the protocol) -------------------------------------------------

    async def delete_scope(self, scope: str) -> int:
        """Remove every chunk, category and run of ``scope``; returns the rows removed."""

        def write(cursor: Any) -> int:
            removed = cursor.execute("DELETE FROM memoir_chunk WHERE scope = %s", (scope,))
            removed += cursor.execute("DELETE FROM memoir_run WHERE scope = %s", (scope,))
            cursor.execute(
                "SELECT COALESCE(MAX(level), 0) FROM memoir_category WHERE scope = %s", (scope,)
            )
            # Children before parents: the parent reference is a plain foreign key.
            for level in range(int(cursor.fetchone()[0]), 0, -1):
                removed += cursor.execute(
                    "DELETE FROM memoir_category WHERE scope = %s AND level = %s", (scope, level)
                )
            return int(removed)

        return await self.connection.run(write, write=True)


def _create_schema(cursor: Any) -> int:
    cursor.execute("SELECT GET_LOCK(%s, %s)", (SCHEMA_LOCK_NAME, _SCHEMA_LOCK_TIMEOUT_S))
    try:
        cursor.execute("SELECT VERSION()")
        mariadb = "mariadb" in str(cursor.fetchone()[0]).lower()
        for statement in schema_statements(mariadb=mariadb):  # DDL commits on its own
            cursor.execute(statement)
        cursor.execute(
            "INSERT IGNORE INTO memoir_schema (version, applied_at) VALUES (%s, %s)",
            (SCHEMA_VERSION, utc_now()),
        )
        cursor.execute("SELECT MAX(version) FROM memoir_schema")
        row = cursor.fetchone()
    finally:
        cursor.execute("SELECT RELEASE_LOCK(%s)", (SCHEMA_LOCK_NAME,))
    return int(row[0]) if row and row[0] is not None else SCHEMA_VERSION


# The rules below are the same as the PostgreSQL store's (kept per backend so each backend
# package stands alone); the cross-backend contract suite holds them in step.
