"""The :class:`~memory_core.hierarchy.tree_port.CategoryTreePort` on PostgreSQL.

Chunk vectors are the ``memoir_chunk.embedding`` float32 blobs; a planned tree is applied in one
transaction (categories created or reused by parent and normalised name, chunks relinked, the
categories left empty deleted), as on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from memory_core.hierarchy.store import (
    CATEGORY_COLUMNS,
    category_from_row,
    check_category_level,
    check_category_name,
    normalise_category_name,
)
from memory_core.hierarchy.tree_port import TreePlan, TreeSnapshot, snapshot_from_rows
from memory_core.models import utc_now
from memory_core.storage.postgres.hierarchy import PostgresHierarchyStore

__all__ = ["PostgresCategoryTree"]

Conn = psycopg.AsyncConnection[Any]


class PostgresCategoryTree:
    """The tree port over an opened :class:`PostgresHierarchyStore`."""

    def __init__(self, store: PostgresHierarchyStore) -> None:
        self.store = store

    async def snapshot(self, scope: str) -> TreeSnapshot:
        async def read(conn: Conn) -> TreeSnapshot:
            cur = await conn.execute(
                "SELECT chunk_id, uid, category_id, text, token_count, embedding "
                "FROM memoir_chunk WHERE scope = %s ORDER BY chunk_id",
                (scope,),
            )
            return snapshot_from_rows(list(await cur.fetchall()))

        return await self.store.connection.run(read)

    async def leaf_levels(self, scope: str) -> set[int]:
        async def read(conn: Conn) -> set[int]:
            cur = await conn.execute(
                "SELECT DISTINCT c.level FROM memoir_category AS c WHERE c.scope = %s AND "
                "EXISTS (SELECT 1 FROM memoir_chunk AS k WHERE k.category_id = c.category_id)",
                (scope,),
            )
            return {int(level) for (level,) in await cur.fetchall()}

        return await self.store.connection.run(read)

    async def sources(self, scope: str, uids: Sequence[str]) -> dict[str, str]:
        wanted = list(dict.fromkeys(uids))

        async def read(conn: Conn) -> dict[str, str]:
            cur = await conn.execute(
                "SELECT uid, source FROM memoir_chunk WHERE scope = %s AND uid = ANY(%s) "
                "AND source IS NOT NULL",
                (scope, wanted),
            )
            return {uid: source for uid, source in await cur.fetchall()}

        return await self.store.connection.run(read) if wanted else {}

    async def apply(self, scope: str, plan: TreePlan) -> dict[int, int]:
        depth = self.store.depth
        planned = []
        for category in plan.categories:
            shown = check_category_name(category.name)
            planned.append((category, shown, normalise_category_name(shown)))

        async def write(conn: Conn) -> dict[int, int]:
            ids: dict[int, int] = {}
            for category, shown, norm in planned:  # parents first
                parent = None if category.parent is None else ids[category.parent]
                check_category_level(category.level, parent, depth)
                await conn.execute(
                    "INSERT INTO memoir_category (scope, parent_id, level, name, norm_name, "
                    "created_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (scope, parent, category.level, shown, norm, utc_now()),
                )
                cur = await conn.execute(
                    f"SELECT {CATEGORY_COLUMNS} FROM memoir_category WHERE scope = %s "
                    "AND COALESCE(parent_id, 0) = %s AND norm_name = %s",
                    (scope, parent or 0, norm),
                )
                row = await cur.fetchone()
                assert row is not None  # just inserted, or its twin was there
                ids[category.key] = category_from_row(row).category_id
            async with conn.cursor() as cursor:
                await cursor.executemany(
                    "UPDATE memoir_chunk SET category_id = %s WHERE chunk_id = %s AND scope = %s",
                    [(ids[key], chunk_id, scope) for chunk_id, key in sorted(plan.moves.items())],
                )
            cur = await conn.execute(
                "SELECT category_id FROM memoir_category WHERE scope = %s "
                "ORDER BY level DESC, category_id",
                (scope,),
            )
            keep = set(ids.values())
            for (category_id,) in await cur.fetchall():
                if int(category_id) in keep:
                    continue
                await conn.execute(
                    "DELETE FROM memoir_category AS c WHERE c.category_id = %s "
                    "AND NOT EXISTS (SELECT 1 FROM memoir_chunk WHERE category_id = c.category_id) "
                    "AND NOT EXISTS (SELECT 1 FROM memoir_category AS child "
                    "WHERE child.parent_id = c.category_id)",
                    (category_id,),
                )
            return ids

        return await self.store.connection.run(write, write=True)
