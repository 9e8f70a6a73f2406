"""The category hierarchy on the shared SQLite store (the :class:`HierarchyStore` contract).

Categories live in the ``category`` table (unique on scope, parent and normalised name); chunks
are ``item`` rows of kind ``hierarchy_chunk`` linked by ``category_id`` and written through
``items.insert_items``, so they get FTS and vector rows and hybrid search finds them too. Query
runs go to the ``run`` table. Every function below is a plain sync function over a DB-API
connection, run through ``SqliteDatabase.read`` / ``write``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.errors import InvalidInputError
from memory_core.hierarchy.store import (
    CATEGORY_COLUMNS,
    MAX_CATEGORY_NAME_CHARS,
    Category,
    HierarchyChunk,
    NewChunk,
    category_from_row,
    check_category_name,
    normalise_category_name,
)
from memory_core.models import NewItem, utc_now
from memory_core.storage.sqlite import items as item_sql
from memory_core.storage.sqlite.store import SqliteStore

__all__ = ["CHUNK_KIND", "MAX_CATEGORY_NAME_CHARS", "SqliteHierarchyStore"]

CHUNK_KIND = "hierarchy_chunk"


def _get_category(conn: Any, scope: str, category_id: int) -> Category | None:
    row = conn.execute(
        f"SELECT {CATEGORY_COLUMNS} FROM category WHERE category_id = ? AND scope = ?",
        (category_id, scope),
    ).fetchone()
    return None if row is None else category_from_row(row)


def _children(conn: Any, scope: str, parent_id: int | None, level: int | None) -> list[Category]:
    where = ["scope = ?", "parent_id IS NULL" if parent_id is None else "parent_id = ?"]
    params: list[Any] = [scope] if parent_id is None else [scope, parent_id]
    if level is not None:
        where.append("level = ?")
        params.append(level)
    rows = conn.execute(
        f"SELECT {CATEGORY_COLUMNS} FROM category WHERE {' AND '.join(where)} "
        "ORDER BY norm_name, category_id",
        params,
    ).fetchall()
    return [category_from_row(r) for r in rows]


def _all_categories(conn: Any, scope: str) -> list[Category]:
    rows = conn.execute(
        f"SELECT {CATEGORY_COLUMNS} FROM category WHERE scope = ? "
        "ORDER BY level, ifnull(parent_id, 0), norm_name, category_id",
        (scope,),
    ).fetchall()
    return [category_from_row(r) for r in rows]


def _count_categories(conn: Any, scope: str) -> int:
    return int(
        conn.execute("SELECT count(*) FROM category WHERE scope = ?", (scope,)).fetchone()[0]
    )


def _create_category(
    conn: Any, scope: str, parent_id: int | None, level: int, name: str, depth: int
) -> Category:
    shown = check_category_name(name)
    if not 1 <= level <= depth:
        raise InvalidInputError(
            f"category level {level} is outside the hierarchy depth 1..{depth}",
            hint="create categories from level 1 down to hierarchy.depth",
        )
    if level == 1 and parent_id is not None:
        raise InvalidInputError(
            f"a level-1 category cannot have a parent (got parent_id={parent_id})",
            hint="pass parent_id=None for level 1",
        )
    if level > 1:
        parent = None if parent_id is None else _get_category(conn, scope, parent_id)
        if parent is None or parent.level != level - 1:
            found = "missing" if parent is None else f"at level {parent.level}"
            raise InvalidInputError(
                f"a level-{level} category needs a parent at level {level - 1}; "
                f"parent_id={parent_id} is {found}",
                hint="create or choose the parent category one level up first",
            )
    norm = normalise_category_name(shown)
    conn.execute(
        "INSERT INTO category (scope, parent_id, level, name, norm_name, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (scope, parent_id, level, shown, norm, utc_now()),
    )
    row = conn.execute(
        f"SELECT {CATEGORY_COLUMNS} FROM category "
        "WHERE scope = ? AND ifnull(parent_id, 0) = ? AND norm_name = ?",
        (scope, parent_id or 0, norm),
    ).fetchone()
    return category_from_row(row)


def _add_chunks(
    conn: Any,
    scope: str,
    category_id: int,
    chunks: Sequence[NewChunk],
    vectors: np.ndarray | None,
    depth: int,
) -> list[int]:
    category = _get_category(conn, scope, category_id)
    if category is None or category.level != depth:
        found = "missing" if category is None else f"at level {category.level}"
        raise InvalidInputError(
            f"chunks link only to leaf categories (level {depth}); category {category_id} is {found}",
            hint="classify the chunk down to the deepest level first",
        )
    items = [
        NewItem(
            uid=chunk.uid,
            kind=CHUNK_KIND,
            text=chunk.text,
            token_count=chunk.token_count,
            scope=scope,
            content_hash=chunk.content_hash,
            category_id=category_id,
            created_at=chunk.created_at,
            metadata={**chunk.metadata, **({"source": chunk.source} if chunk.source else {})},
        )
        for chunk in chunks
    ]
    return item_sql.insert_items(conn, items, vectors)


def _chunks_in_category(
    conn: Any, scope: str, category_id: int, after: tuple[str, str] | None, limit: int
) -> list[HierarchyChunk]:
    where = "scope = ? AND category_id = ? AND kind = ? AND deleted = 0"
    params: list[Any] = [scope, category_id, CHUNK_KIND]
    if after is not None:
        where += " AND (created_at, uid) > (?, ?)"
        params.extend(after)
    rows = conn.execute(
        "SELECT item_id, uid, category_id, text, token_count, content_hash, created_at FROM item "
        f"WHERE {where} ORDER BY created_at, uid LIMIT ?",
        (*params, max(1, int(limit))),
    ).fetchall()
    return [HierarchyChunk(int(r[0]), r[1], int(r[2]), r[3], int(r[4]), r[5], r[6]) for r in rows]


def _existing_chunks(conn: Any, scope: str, uids: Sequence[str]) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    for start in range(0, len(uids), 500):
        batch = list(uids[start : start + 500])
        marks = ",".join("?" * len(batch))
        rows = conn.execute(
            f"SELECT uid, item_id, category_id FROM item WHERE scope = ? AND kind = ? "
            f"AND category_id IS NOT NULL AND uid IN ({marks})",
            (scope, CHUNK_KIND, *batch),
        )
        found.update({r[0]: (int(r[1]), int(r[2])) for r in rows})
    return found


def _chunk_counts(conn: Any, scope: str) -> dict[int, int]:
    rows = conn.execute(
        "SELECT category_id, count(*) FROM item WHERE scope = ? AND kind = ? AND deleted = 0 "
        "AND category_id IS NOT NULL GROUP BY category_id",
        (scope, CHUNK_KIND),
    )
    return {int(r[0]): int(r[1]) for r in rows}


def _record_run(conn: Any, scope: str, kind: str, took_ms: float, payload: dict[str, Any]) -> int:
    cursor = conn.execute(
        "INSERT INTO run (scope, kind, started_at, took_ms, payload) VALUES (?, ?, ?, ?, ?)",
        (scope, kind, utc_now(), took_ms, json.dumps(payload, ensure_ascii=False, default=str)),
    )
    return int(cursor.lastrowid)


def _list_runs(conn: Any, scope: str, kind: str | None, limit: int) -> list[dict[str, Any]]:
    where, params = "scope = ?", [scope]
    if kind is not None:
        where += " AND kind = ?"
        params.append(kind)
    rows = conn.execute(
        f"SELECT run_id, scope, kind, started_at, took_ms, payload FROM run WHERE {where} "
        "ORDER BY run_id DESC LIMIT ?",
        (*params, max(1, int(limit))),
    ).fetchall()
    return [
        {
            "run_id": int(r[0]),
            "scope": r[1],
            "kind": r[2],
            "started_at": r[3],
            "took_ms": r[4],
            "payload": json.loads(r[5]),
        }
        for r in rows
    ]


class SqliteHierarchyStore:
    """The hierarchy on an open :class:`SqliteStore` (which the facade opens and closes).

    Args:
        store: the shared store.
        depth: the configured hierarchy depth (1..100); chunks link only at this level.

    Raises:
        InvalidInputError: ``depth`` is outside 1..100.
    """

    backend = "sqlite"

    def __init__(self, store: SqliteStore, *, depth: int) -> None:
        if not 1 <= depth <= 100:
            raise InvalidInputError(
                f"hierarchy depth {depth} is outside 1..100", hint="set hierarchy.depth to 1..100"
            )
        self.store = store
        self.depth = depth

    async def open(self) -> SqliteHierarchyStore:
        # The tables come with the shared store's migrations (0001, 0004), applied on its open.
        return self

    async def close(self) -> None:
        # The facade owns the shared store's connections.
        return None

    async def categories(
        self, scope: str, *, parent_id: int | None, level: int | None = None
    ) -> list[Category]:
        return await self.store.db.read(_children, scope, parent_id, level)

    async def all_categories(self, scope: str) -> list[Category]:
        return await self.store.db.read(_all_categories, scope)

    async def count_categories(self, scope: str) -> int:
        return await self.store.db.read(_count_categories, scope)

    async def create_category(
        self, scope: str, *, parent_id: int | None, level: int, name: str
    ) -> Category:
        return await self.store.db.write(
            _create_category, scope, parent_id, level, name, self.depth
        )

    async def add_chunks(
        self,
        scope: str,
        category_id: int,
        chunks: Sequence[NewChunk],
        vectors: Any | None = None,
    ) -> list[int]:
        return await self.store.db.write(
            _add_chunks, scope, category_id, list(chunks), vectors, self.depth
        )

    async def chunks_in_category(
        self,
        scope: str,
        category_id: int,
        *,
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[HierarchyChunk]:
        return await self.store.db.read(_chunks_in_category, scope, category_id, after, limit)

    async def existing_chunks(self, scope: str, uids: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Chunks already stored, by uid: (chunk id, category id). Lets re-ingest skip the LLM."""
        return await self.store.db.read(_existing_chunks, scope, list(uids))

    async def chunk_counts(self, scope: str) -> dict[int, int]:
        """Chunks per category id (for the category tree)."""
        return await self.store.db.read(_chunk_counts, scope)

    async def record_run(
        self, scope: str, kind: str, took_ms: float, payload: dict[str, Any]
    ) -> int:
        return await self.store.db.write(_record_run, scope, kind, took_ms, payload)

    async def list_runs(
        self, scope: str, *, kind: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        return await self.store.db.read(_list_runs, scope, kind, limit)
