"""The :class:`~memory_core.hierarchy.tree_port.CategoryTreePort` on the shared SQLite store.

Reads a scope's hierarchy chunks with their ``item_vec`` vectors, and applies a re-clustered
tree in one write transaction, so a reader never sees chunks linked to a deleted category and a
crash leaves the old tree whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.hierarchy.tree_port import ChunkPoint, TreePlan, TreeSnapshot
from memory_core.storage.sqlite.doc_vectors import load_vectors
from memory_core.storage.sqlite.hierarchy import CHUNK_KIND, _create_category
from memory_core.storage.sqlite.store import SqliteStore

__all__ = ["SqliteCategoryTree"]


def _snapshot(conn: Any, scope: str) -> TreeSnapshot:
    rows = conn.execute(
        "SELECT item_id, uid, category_id, text, token_count FROM item "
        "WHERE scope = ? AND kind = ? AND deleted = 0 AND category_id IS NOT NULL "
        "ORDER BY item_id",
        (scope, CHUNK_KIND),
    ).fetchall()
    loaded = load_vectors(conn, scope, [CHUNK_KIND])
    if loaded is None or not rows:
        return TreeSnapshot([], np.zeros((0, 1), dtype=np.float32))
    ids, matrix = loaded
    row_of = {int(item_id): index for index, item_id in enumerate(ids)}
    points: list[ChunkPoint] = []
    keep: list[int] = []
    for row in rows:
        index = row_of.get(int(row[0]))
        if index is None:  # a chunk stored without a vector cannot be placed by meaning
            continue
        points.append(ChunkPoint(int(row[0]), row[1], int(row[2]), row[3], int(row[4])))
        keep.append(index)
    return TreeSnapshot(points, matrix[keep] if keep else matrix[:0])


def _leaf_levels(conn: Any) -> dict[str, set[int]]:
    levels: dict[str, set[int]] = {}
    rows = conn.execute(
        "SELECT c.scope, c.level FROM category AS c WHERE EXISTS "
        "(SELECT 1 FROM item WHERE item.category_id = c.category_id AND item.kind = ?) "
        "GROUP BY c.scope, c.level",
        (CHUNK_KIND,),
    )
    for scope, level in rows:
        levels.setdefault(scope, set()).add(int(level))
    return levels


def _sources(conn: Any, scope: str, uids: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for start in range(0, len(uids), 500):
        batch = uids[start : start + 500]
        rows = conn.execute(
            "SELECT uid, json_extract(metadata, '$.source') FROM item WHERE scope = ? "
            f"AND kind = ? AND uid IN ({','.join('?' * len(batch))})",
            (scope, CHUNK_KIND, *batch),
        )
        found.update({uid: str(source) for uid, source in rows if source is not None})
    return found


def _apply(conn: Any, scope: str, plan: TreePlan, depth: int) -> dict[int, int]:
    ids: dict[int, int] = {}
    for planned in plan.categories:  # parents first
        parent = None if planned.parent is None else ids[planned.parent]
        ids[planned.key] = _create_category(
            conn, scope, parent, planned.level, planned.name, depth
        ).category_id
    conn.executemany(
        "UPDATE item SET category_id = ? WHERE item_id = ? AND scope = ? AND kind = ?",
        [(ids[key], item_id, scope, CHUNK_KIND) for item_id, key in plan.moves.items()],
    )
    keep = set(ids.values())
    # Deepest first, so a parent emptied by its children's removal goes in the same pass.
    rows = conn.execute(
        "SELECT category_id FROM category WHERE scope = ? ORDER BY level DESC, category_id",
        (scope,),
    ).fetchall()
    for (category_id,) in rows:
        if category_id in keep:
            continue
        conn.execute(
            "DELETE FROM category WHERE category_id = ? "
            "AND NOT EXISTS (SELECT 1 FROM item WHERE category_id = ?) "
            "AND NOT EXISTS (SELECT 1 FROM category AS child WHERE child.parent_id = ?)",
            (category_id, category_id, category_id),
        )
    return ids


class SqliteCategoryTree:
    """The tree port over an open :class:`SqliteStore`.

    Args:
        store: the shared store (the facade opens and closes it).
        depth: the configured hierarchy depth.
    """

    def __init__(self, store: SqliteStore, *, depth: int) -> None:
        self.store = store
        self.depth = depth

    async def snapshot(self, scope: str) -> TreeSnapshot:
        return await self.store.db.read(_snapshot, scope)

    async def leaf_levels(self) -> dict[str, set[int]]:
        return await self.store.db.read(_leaf_levels)

    async def sources(self, scope: str, uids: Sequence[str]) -> dict[str, str]:
        return await self.store.db.read(_sources, scope, list(uids))

    async def apply(self, scope: str, plan: TreePlan) -> dict[int, int]:
        return await self.store.db.write(_apply, scope, plan, self.depth)
