"""The :class:`~memory_core.hierarchy.tree_port.CategoryTreePort` on MySQL / MariaDB.

The same reads and the same one-transaction apply as on PostgreSQL, in PyMySQL's dialect
(names are keyed by ``name_key`` = sha256 of the normalised name, parents by ``parent_key``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_core.hierarchy.store import (
    CATEGORY_COLUMNS,
    category_from_row,
    check_category_level,
    check_category_name,
    normalise_category_name,
)
from memory_core.hierarchy.tree_port import TreePlan, TreeSnapshot, snapshot_from_rows
from memory_core.models import utc_now
from memory_core.storage.mysql.hierarchy import MysqlHierarchyStore, _name_key

__all__ = ["MysqlCategoryTree"]


class MysqlCategoryTree:
    """The tree port over an opened :class:`MysqlHierarchyStore`."""

    def __init__(self, store: MysqlHierarchyStore) -> None:
        self.store = store

    async def snapshot(self, scope: str) -> TreeSnapshot:
        def read(cursor: Any) -> TreeSnapshot:
            cursor.execute(
                "SELECT chunk_id, uid, category_id, text, token_count, embedding "
                "FROM memoir_chunk WHERE scope = %s ORDER BY chunk_id",
                (scope,),
            )
            return snapshot_from_rows(list(cursor.fetchall()))

        return await self.store.connection.run(read)

    async def leaf_levels(self, scope: str) -> set[int]:
        def read(cursor: Any) -> set[int]:
            cursor.execute(
                "SELECT DISTINCT c.level FROM memoir_category AS c WHERE c.scope = %s AND "
                "EXISTS (SELECT 1 FROM memoir_chunk AS k WHERE k.category_id = c.category_id)",
                (scope,),
            )
            return {int(level) for (level,) in cursor.fetchall()}

        return await self.store.connection.run(read)

    async def sources(self, scope: str, uids: Sequence[str]) -> dict[str, str]:
        wanted = list(dict.fromkeys(uids))

        def read(cursor: Any) -> dict[str, str]:
            found: dict[str, str] = {}
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                cursor.execute(
                    "SELECT uid, source FROM memoir_chunk WHERE scope = %s AND source IS NOT NULL "
                    f"AND uid IN ({','.join(['%s'] * len(batch))})",
                    (scope, *batch),
                )
                found.update({uid: source for uid, source in cursor.fetchall()})
            return found

        return await self.store.connection.run(read) if wanted else {}

    async def apply(self, scope: str, plan: TreePlan) -> dict[int, int]:
        depth = self.store.depth
        planned = []
        for category in plan.categories:
            shown = check_category_name(category.name)
            norm = normalise_category_name(shown)
            planned.append((category, shown, norm, _name_key(norm)))

        def write(cursor: Any) -> dict[int, int]:
            ids: dict[int, int] = {}
            for category, shown, norm, key in planned:  # parents first
                parent = None if category.parent is None else ids[category.parent]
                check_category_level(category.level, parent, depth)
                cursor.execute(
                    "INSERT INTO memoir_category (scope, parent_id, level, name, norm_name, "
                    "name_key, created_at, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, '{}') "
                    "ON DUPLICATE KEY UPDATE category_id = category_id",
                    (scope, parent, category.level, shown, norm, key, utc_now()),
                )
                cursor.execute(
                    f"SELECT {CATEGORY_COLUMNS} FROM memoir_category WHERE scope = %s "
                    "AND parent_key = %s AND name_key = %s",
                    (scope, parent or 0, key),
                )
                ids[category.key] = category_from_row(cursor.fetchone()).category_id
            cursor.executemany(
                "UPDATE memoir_chunk SET category_id = %s WHERE chunk_id = %s AND scope = %s",
                [(ids[key], chunk_id, scope) for chunk_id, key in sorted(plan.moves.items())],
            )
            cursor.execute(
                "SELECT category_id FROM memoir_category WHERE scope = %s "
                "ORDER BY level DESC, category_id",
                (scope,),
            )
            keep = set(ids.values())
            for (category_id,) in list(cursor.fetchall()):
                if int(category_id) in keep:
                    continue
                cursor.execute(
                    "SELECT (SELECT count(*) FROM memoir_chunk WHERE category_id = %s) + "
                    "(SELECT count(*) FROM memoir_category WHERE parent_id = %s)",
                    (category_id, category_id),
                )
                if int(cursor.fetchone()[0]) == 0:
                    cursor.execute(
                        "DELETE FROM memoir_category WHERE category_id = %s", (category_id,)
                    )
            return ids

        return await self.store.connection.run(write, write=True)
