"""What the offline classifier needs from storage to re-cluster a scope's category tree
(and where each chunk came from, for citations).

A small port beside :class:`~memory_core.hierarchy.store.HierarchyStore`: read every chunk of a
scope with its vector (:meth:`CategoryTreePort.snapshot`), and apply a planned tree in one
transaction (:meth:`CategoryTreePort.apply`: create or reuse the planned categories, relink the
chunks that move, delete the categories left empty). Every store with the ports has it
(:mod:`memory_core.hierarchy.port_tree`, no SQL) on every backend; :func:`tree_port_for`
returns None for a store without it (a test double), and the offline classifier then falls back
to matching category names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memory_core.scope import Scope

__all__ = [
    "CategoryTreePort",
    "ChunkPoint",
    "PlannedCategory",
    "TreePlan",
    "TreeSnapshot",
    "snapshot_from_rows",
    "tree_port_for",
]


@dataclass(frozen=True, slots=True)
class ChunkPoint:
    """One stored chunk of the tree: ids, its leaf, its text and size."""

    item_id: int
    uid: str
    category_id: int
    text: str
    token_count: int


@dataclass(frozen=True)
class TreeSnapshot:
    """Every chunk of a scope that has a vector, with ``vectors[i]`` the vector of ``points[i]``."""

    points: list[ChunkPoint]
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.points)


@dataclass(frozen=True, slots=True)
class PlannedCategory:
    """A category of a planned tree; ``parent`` is the key of its parent (None at level 1)."""

    key: int
    parent: int | None
    level: int
    name: str


@dataclass(frozen=True)
class TreePlan:
    """The categories to have (parents first) and where existing chunks go: item id -> key."""

    categories: list[PlannedCategory]
    moves: Mapping[int, int] = field(default_factory=dict)


@runtime_checkable
class CategoryTreePort(Protocol):
    async def snapshot(self, scope: Scope) -> TreeSnapshot:
        """Every hierarchy chunk of ``scope`` that has a vector, ordered by item id."""
        ...

    async def leaf_levels(self, scope: Scope) -> set[int]:
        """The levels of the scope's categories that hold chunks (one level, the depth the
        tree was built with, unless ``hierarchy.depth`` changed since)."""
        ...

    async def sources(self, scope: Scope, uids: Sequence[str]) -> dict[str, str]:
        """The ``source`` each chunk was ingested with, by chunk uid (chunks without one are
        left out): answers cite where their passages came from."""
        ...

    async def stamp(self, scope: Scope, *, run_kind: str) -> str:
        """Changes whenever the scope's tree or its chunk vectors may have changed, by any
        process: read in one transaction from values every writer changes in its own (the
        scope's vector generation, the categories, the newest ``run_kind`` run)."""
        ...

    async def apply(self, scope: Scope, plan: TreePlan) -> dict[int, int]:
        """In one transaction: create the planned categories (reusing an existing one with the
        same parent and normalised name), relink the moved chunks, then delete every category of
        the scope that is not planned and holds no chunk and no child.

        Returns:
            The category id of each planned key.

        Raises:
            InvalidInputError: a planned category is invalid (level, parent, name).
        """
        ...


def snapshot_from_rows(rows: Sequence[Sequence[Any]]) -> TreeSnapshot:
    """Rows of (chunk id, uid, category id, text, token count, float32 vector blob or None)."""
    points: list[ChunkPoint] = []
    blobs: list[bytes] = []
    for row in rows:
        if row[5] is None:  # stored without a vector: cannot be placed by meaning
            continue
        points.append(ChunkPoint(int(row[0]), row[1], int(row[2]), row[3], int(row[4])))
        blobs.append(bytes(row[5]))
    if not points:
        return TreeSnapshot([], np.zeros((0, 1), dtype=np.float32))
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(points), -1)
    return TreeSnapshot(points, matrix)


def tree_port_for(store: Any) -> CategoryTreePort | None:
    """The tree port of a hierarchy store on the ports, or None for a store without one."""
    from memory_core.hierarchy.port_store import PortHierarchyStore

    if isinstance(store, PortHierarchyStore):
        from memory_core.hierarchy.port_tree import PortCategoryTree

        return PortCategoryTree(store.store)
    return None
