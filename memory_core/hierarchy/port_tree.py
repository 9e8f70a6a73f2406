"""The :class:`~memory_core.hierarchy.tree_port.CategoryTreePort` on the store's ports (no SQL).

Chunks are items of kind ``hierarchy_chunk`` filed under leaf categories; their vectors are in
the vector index. A planned tree is applied in one write transaction: categories created (or
reused by parent and normalised name), chunks relinked with an item update, then every
category left without items and children deleted, deepest first. A reader never sees a chunk
under a deleted category, and a crash leaves the old tree whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from memory_core.hierarchy.tree_port import ChunkPoint, TreePlan, TreeSnapshot
from memory_core.kinds import HIERARCHY_CHUNK
from memory_core.models import Item, ItemUpdate
from memory_core.scope import Scope
from memory_core.storage.ports import Store, Tx

__all__ = ["PortCategoryTree"]

_PAGE = 1000
_KINDS = [HIERARCHY_CHUNK]


def _all_chunks(tx: Tx, scope: Scope) -> list[Item]:
    chunks: list[Item] = []
    after: Item | None = None
    while True:
        page = tx.items.find(scope, kinds=_KINDS, order="id", after=after, limit=_PAGE)
        chunks.extend(page)
        if len(page) < _PAGE:
            return chunks
        after = page[-1]


def _snapshot(tx: Tx, scope: Scope) -> TreeSnapshot:
    ids, matrix = tx.vectors.load(scope, _KINDS)
    row_of = {int(item_id): index for index, item_id in enumerate(ids)}
    points: list[ChunkPoint] = []
    keep: list[int] = []
    for item in _all_chunks(tx, scope):
        index = row_of.get(item.item_id)
        if index is None or item.category_id is None:  # without a vector: not placeable
            continue
        points.append(
            ChunkPoint(item.item_id, item.uid, item.category_id, item.text, item.token_count)
        )
        keep.append(index)
    if not points:
        return TreeSnapshot([], np.zeros((0, 1), dtype=np.float32))
    return TreeSnapshot(points, np.asarray(matrix, dtype=np.float32)[keep])


def _apply(tx: Tx, scope: Scope, plan: TreePlan) -> dict[int, int]:
    ids: dict[int, int] = {}
    for planned in plan.categories:  # parents first
        parent = None if planned.parent is None else ids[planned.parent]
        created = tx.categories.create(
            scope, parent_id=parent, level=planned.level, name=planned.name
        )
        ids[planned.key] = created.category_id
    for item_id, key in sorted(plan.moves.items()):
        tx.items.update(item_id, ItemUpdate(category_id=ids[key]))
    keep = set(ids.values())
    holding = tx.categories.item_counts(scope)
    categories = sorted(tx.categories.all(scope), key=lambda c: (-c.level, c.category_id))
    parents = {c.parent_id for c in categories if c.parent_id is not None}
    removed: set[int] = set()
    for category in categories:  # deepest first: a parent emptied by its children goes too
        if category.category_id in keep or holding.get(category.category_id):
            continue
        children = {c.category_id for c in categories if c.parent_id == category.category_id}
        if category.category_id in parents and not children <= removed:
            continue
        tx.categories.delete([category.category_id])
        removed.add(category.category_id)
    return ids


def _stamp(tx: Tx, scope: Scope, run_kind: str) -> str:
    categories = sorted(
        (c.category_id, c.parent_id or 0, c.level, c.name) for c in tx.categories.all(scope)
    )
    runs = tx.log.runs(scope, kinds=[run_kind], limit=1)
    tree = hashlib.sha256(repr(categories).encode()).hexdigest()[:16]
    return f"{tx.vectors.stamp(scope)}/{tree}/{runs[0].run_id if runs else 0}"


def _leaf_levels(tx: Tx, scope: Scope) -> set[int]:
    holding = tx.categories.item_counts(scope, kinds=_KINDS)
    found = tx.categories.get(list(holding))
    return {category.level for category in found.values()}


def _sources(tx: Tx, scope: Scope, uids: list[str]) -> dict[str, str]:
    found = tx.items.by_uid(uids)
    return {
        uid: str(item.metadata["source"])
        for uid, item in found.items()
        if item.scope == scope.key and item.metadata.get("source") is not None
    }


class PortCategoryTree:
    """The tree port over an open :class:`~memory_core.storage.ports.Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def snapshot(self, scope: Scope) -> TreeSnapshot:
        return await self.store.read(lambda tx: _snapshot(tx, scope))

    async def stamp(self, scope: Scope, *, run_kind: str) -> str:
        return await self.store.read(lambda tx: _stamp(tx, scope, run_kind))

    async def leaf_levels(self, scope: Scope) -> set[int]:
        return await self.store.read(lambda tx: _leaf_levels(tx, scope))

    async def sources(self, scope: Scope, uids: Sequence[str]) -> dict[str, str]:
        wanted = list(dict.fromkeys(uids))
        return await self.store.read(lambda tx: _sources(tx, scope, wanted)) if wanted else {}

    async def apply(self, scope: Scope, plan: TreePlan) -> dict[int, int]:
        return await self.store.write(lambda tx: _apply(tx, scope, plan))
