"""The offline classifier: file chunks by meaning, and re-cluster the tree as the store grows.

With no model to ask, categories come from the content itself:

- **Re-clustering.** While the scope's tree is *managed* (it was built here and nobody named its
  categories), every time the scope grows by half (and on its first ingest) all its chunks are
  clustered level by level (:func:`~memory_core.hierarchy.clustering.build_tree`) and named from
  their distinctive words (:func:`~memory_core.hierarchy.labels.name_tree`); the new tree is
  applied in one transaction: categories kept by name, chunks relinked, emptied ones removed. So
  groups merge and split as the store grows.
- **Between re-clusterings** a chunk joins the leaf whose centroid is nearest. A chunk that fits
  every leaf worse than almost all stored chunks fit theirs (a new topic) brings the next
  re-clustering forward (after a tenth more chunks instead of a half).
- **Curated trees.** Once an agent proposes categories (``ingest(..., category=…)``) or a model
  classifies, the tree is no longer re-clustered: a new chunk joins the nearest leaf, or, when
  it fits no leaf, starts a new top-level path named from its own words (while the cap allows).
  ``memoir categories --recluster`` re-clusters on request.

The state (managed or not, chunk count at the last re-clustering) is a ``hierarchy_tree`` run
record of the scope.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import structlog

from memory_core.config import HierarchySettings
from memory_core.hierarchy.classify import Classification, may_create
from memory_core.hierarchy.clustering import build_tree, normalise_rows
from memory_core.hierarchy.labels import name_path, name_tree
from memory_core.hierarchy.store import Category, HierarchyStore
from memory_core.hierarchy.tree_port import (
    CategoryTreePort,
    PlannedCategory,
    TreePlan,
    TreeSnapshot,
)
from memory_core.scope import Scope

__all__ = ["CLASSIFIER_NAME", "TREE_RUN_KIND", "OfflineTree", "TreeState"]

log = structlog.get_logger(__name__)
TREE_RUN_KIND = "hierarchy_tree"
CLASSIFIER_NAME = "memoir-offline:clusters"
_GROWTH = 1.5  # re-cluster when the scope has grown by half since the last time
_NOVEL_GROWTH = 1.1  # ... or by a tenth, when a new chunk fits no leaf
_REBUILD_SHARE = 0.75  # a re-clustered tree leaves a quarter of the cap for new topics
_NOVEL_PERCENTILE = 5.0  # a chunk fitting worse than 95% of stored chunks starts a new path
_NAMING_SAMPLE = 200  # stored texts a lone new category is named against


@dataclass(frozen=True)
class TreeState:
    """Whether the offline classifier owns the scope's tree, and its size when last clustered."""

    managed: bool
    clustered_at: int = 0


class OfflineTree:
    """Files new chunks of one scope into a tree built from the content.

    Args:
        store: the hierarchy store.
        port: its tree port (snapshot and apply).
        settings: depth, cap, token budget and the re-clustering limit.
    """

    def __init__(
        self, store: HierarchyStore, port: CategoryTreePort, settings: HierarchySettings
    ) -> None:
        self.store = store
        self.port = port
        self.settings = settings

    # -- state ---------------------------------------------------------------------------------

    async def state(self, scope: Scope) -> TreeState:
        runs = await self.store.list_runs(scope, kind=TREE_RUN_KIND, limit=1)
        if runs:
            payload = runs[0]["payload"]
            return TreeState(bool(payload.get("managed")), int(payload.get("chunks", 0)))
        # No record: an empty scope is ours to build; a tree made before (by a model, an agent
        # or the name-matching classifier) is left as it is until asked to re-cluster.
        return TreeState(managed=await self.store.count_categories(scope) == 0)

    async def record(self, scope: Scope, state: TreeState, reason: str, took_s: float) -> None:
        await self.store.record_run(
            scope,
            TREE_RUN_KIND,
            took_s * 1000,
            {
                "managed": state.managed,
                "chunks": state.clustered_at,
                "reason": reason,
                "categories": await self.store.count_categories(scope),
            },
        )

    async def release(self, scope: Scope, reason: str) -> None:
        """Mark the tree curated: it is never re-clustered on its own again."""
        state = await self.state(scope)
        if state.managed:
            await self.record(scope, TreeState(False, state.clustered_at), reason, 0.0)

    async def signature(self, scope: Scope) -> str:
        """Changes whenever the tree or its chunks may have changed (any process).

        Read from values the writers change in their own transaction (the scope's vector
        generation, the categories) and the newest re-clustering run. Not from the newest
        ingest run: a forget records none, and a chunk stored by a process that stops before
        recording its run would stay out of every other process's centroids.
        """
        return await self.port.stamp(scope, run_kind=TREE_RUN_KIND)

    async def centroids(self, scope: Scope) -> dict[str, np.ndarray]:
        """The unit centroid of every category's chunks, keyed by its traversal label (the name
        at level 1, the full path "A / B" below)."""
        snapshot = await self.port.snapshot(scope)
        if not len(snapshot):
            return {}
        by_id = {c.category_id: c for c in await self.store.all_categories(scope)}
        unit = normalise_rows(snapshot.vectors)
        sums: dict[int, np.ndarray] = {}
        for index, point in enumerate(snapshot.points):
            leaf = by_id.get(point.category_id)
            if leaf is None:
                continue
            for category in _path(leaf, by_id):
                if category.category_id in sums:
                    sums[category.category_id] = sums[category.category_id] + unit[index]
                else:
                    sums[category.category_id] = unit[index].copy()
        out: dict[str, np.ndarray] = {}
        for category_id, total in sums.items():
            label = " / ".join(c.name for c in _path(by_id[category_id], by_id))
            out[label] = total / max(float(np.linalg.norm(total)), 1e-12)
        return out

    # -- filing --------------------------------------------------------------------------------

    async def file(
        self,
        scope: Scope,
        texts: Sequence[str],
        vectors: np.ndarray,
        token_counts: Sequence[int],
    ) -> list[Classification]:
        """Where each new chunk goes (categories are created, existing chunks maybe relinked).

        The chunks themselves are not written here: the caller links each to its leaf.
        """
        if not texts:
            return []
        state = await self.state(scope)
        snapshot = await self.port.snapshot(scope)
        total = len(snapshot) + len(texts)
        if state.managed and total <= self.settings.recluster_max_chunks:
            empty = await self.store.count_categories(scope) == 0
            grown = total >= max(2, math.ceil(_GROWTH * state.clustered_at))
            # Something unlike every leaf re-clusters sooner (after a tenth more chunks).
            novel = total >= max(2, math.ceil(_NOVEL_GROWTH * state.clustered_at)) and (
                await self._any_novel(scope, snapshot, vectors)
            )
            if empty or grown or novel:
                reason = "first" if empty else "grown" if grown else "new topic"
                return await self._recluster(
                    scope, snapshot, texts, vectors, token_counts, reason=reason
                )
        # A managed tree waits for its next re-clustering; a curated one opens new paths.
        return await self._nearest(scope, snapshot, texts, vectors, new_paths=not state.managed)

    async def recluster(self, scope: Scope) -> int:
        """Re-cluster every chunk of ``scope`` now (and manage the tree from then on).

        Returns:
            The number of categories of the new tree.
        """
        snapshot = await self.port.snapshot(scope)
        if len(snapshot):
            await self._recluster(
                scope, snapshot, [], np.zeros((0, snapshot.vectors.shape[1])), [], "requested"
            )
        return await self.store.count_categories(scope)

    async def _recluster(
        self,
        scope: Scope,
        snapshot: TreeSnapshot,
        texts: Sequence[str],
        vectors: np.ndarray,
        token_counts: Sequence[int],
        reason: str,
    ) -> list[Classification]:
        started = time.perf_counter()
        settings = self.settings
        all_texts = [p.text for p in snapshot.points] + list(texts)
        all_vectors = (
            np.vstack([snapshot.vectors, vectors]) if len(snapshot) else np.asarray(vectors)
        )
        tokens = [p.token_count for p in snapshot.points] + list(token_counts)
        mean_tokens = max(1.0, sum(tokens) / max(1, len(tokens)))
        shape = build_tree(
            all_vectors,
            depth=settings.depth,
            max_categories=max(
                settings.depth, math.floor(settings.max_categories * _REBUILD_SHARE)
            ),
            leaf_capacity=max(2, int(settings.max_token_budget // mean_tokens)),
        )
        names = name_tree(shape, all_texts)
        plan = TreePlan(
            categories=[
                PlannedCategory(key, node.parent, node.level, names[key])
                for key, node in enumerate(shape.nodes)
            ],
            moves={
                point.item_id: shape.leaf_of[index] for index, point in enumerate(snapshot.points)
            },
        )
        before = {c.category_id for c in await self.store.all_categories(scope)}
        ids = await self.port.apply(scope, plan)
        by_id = {c.category_id: c for c in await self.store.all_categories(scope)}
        filed = []
        for offset in range(len(texts)):
            keys = shape.path(shape.leaf_of[len(snapshot) + offset])
            path = [by_id[ids[key]] for key in keys]
            created = [
                " / ".join(c.name for c in path[: depth + 1])
                for depth, c in enumerate(path)
                if c.category_id not in before
            ]
            before.update(c.category_id for c in path)
            filed.append(Classification(path[-1], path, created, [CLASSIFIER_NAME]))
        took = time.perf_counter() - started
        await self.record(scope, TreeState(True, len(all_texts)), reason, took)
        log.info(
            "category tree re-clustered",
            chunks=len(all_texts),
            categories=len(shape.nodes),
            seconds=round(took, 3),
        )
        return filed

    async def _any_novel(self, scope: Scope, snapshot: TreeSnapshot, vectors: np.ndarray) -> bool:
        by_id = {c.category_id: c for c in await self.store.all_categories(scope)}
        leaf_ids, centroids, floor = _leaf_centroids(snapshot, self.settings.depth, by_id)
        if not leaf_ids:
            return False
        best = (normalise_rows(np.asarray(vectors)) @ centroids.T).max(axis=1)
        return bool((best < floor).any())

    async def _nearest(
        self,
        scope: Scope,
        snapshot: TreeSnapshot,
        texts: Sequence[str],
        vectors: np.ndarray,
        *,
        new_paths: bool,
    ) -> list[Classification]:
        categories = await self.store.all_categories(scope)
        by_id = {c.category_id: c for c in categories}
        leaf_ids, centroids, floor = _leaf_centroids(snapshot, self.settings.depth, by_id)
        unit = normalise_rows(np.asarray(vectors))
        filed: list[Classification] = []
        existing = len(categories)
        for index, text in enumerate(texts):
            leaf: Category | None = None
            created: list[str] = []
            if leaf_ids:
                scores = centroids @ unit[index]
                best = int(np.argmax(scores))
                novel = new_paths and float(scores[best]) < floor
                if not novel or not may_create(
                    existing, 1, self.settings.depth, self.settings.max_categories
                ):
                    leaf = by_id[leaf_ids[best]]
            elif categories:  # a tree without vectors to compare with: its first leaf
                leaf = next(c for c in categories if c.level == self.settings.depth)
            if leaf is None:
                others = [
                    p.text for p in snapshot.points[:: max(1, len(snapshot) // _NAMING_SAMPLE)]
                ]
                path = await self._new_path(scope, text, others, by_id)
                existing += len(path)
                created = [" / ".join(c.name for c in path[: i + 1]) for i in range(len(path))]
                leaf = path[-1]
                leaf_ids.append(leaf.category_id)
                centroids = (
                    np.vstack([centroids, unit[index : index + 1]])
                    if len(centroids)
                    else unit[index : index + 1]
                )
            filed.append(Classification(leaf, _path(leaf, by_id), created, [CLASSIFIER_NAME]))
        return filed

    async def _new_path(
        self, scope: Scope, text: str, others: list[str], by_id: dict[int, Category]
    ) -> list[Category]:
        top = [c.name for c in by_id.values() if c.level == 1]
        path: list[Category] = []
        parent: Category | None = None
        for level, name in enumerate(
            name_path(text, others, self.settings.depth, exclude=top), start=1
        ):
            parent = await self.store.create_category(
                scope,
                parent_id=None if parent is None else parent.category_id,
                level=level,
                name=name,
            )
            by_id[parent.category_id] = parent
            path.append(parent)
        return path


def _path(leaf: Category, by_id: dict[int, Category]) -> list[Category]:
    path = [leaf]
    while path[-1].parent_id is not None and path[-1].parent_id in by_id:
        path.append(by_id[path[-1].parent_id])
    return path[::-1]


def _leaf_centroids(
    snapshot: TreeSnapshot, depth: int, by_id: dict[int, Category]
) -> tuple[list[int], np.ndarray, float]:
    """Leaf ids, their unit centroids, and the novelty floor: the 5th percentile of how well
    stored chunks fit the rest of their own leaf (leave-one-out, so a small leaf does not look
    tighter than it is; -inf below 20 such chunks)."""
    if not len(snapshot):
        return [], np.zeros((0, 1)), -math.inf
    unit = normalise_rows(snapshot.vectors)
    leaves = np.array([p.category_id for p in snapshot.points])
    leaf_ids = sorted(
        {int(c) for c in leaves if (cat := by_id.get(int(c))) is not None and cat.level == depth}
    )
    if not leaf_ids:
        return [], np.zeros((0, unit.shape[1])), -math.inf
    sums = np.stack([unit[leaves == c].sum(axis=0) for c in leaf_ids])
    sizes = np.array([(leaves == c).sum() for c in leaf_ids])
    centroids = normalise_rows(sums)
    row = {c: i for i, c in enumerate(leaf_ids)}
    fits = []
    for index, leaf in enumerate(leaves):
        at = row.get(int(leaf))
        if at is None or sizes[at] < 2:
            continue
        rest = sums[at] - unit[index]
        fits.append(float(unit[index] @ rest) / max(float(np.linalg.norm(rest)), 1e-12))
    floor = float(np.percentile(fits, _NOVEL_PERCENTILE)) if len(fits) >= 20 else -math.inf
    return leaf_ids, centroids, floor
