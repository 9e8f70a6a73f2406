"""A category tree from chunk embeddings: clustered level by level, within depth and the cap.

Pure numpy, deterministic (seeded). The offline classifier (:mod:`memory_core.hierarchy.offline_tree`)
runs it over every chunk of a scope; :mod:`memory_core.hierarchy.labels` names the nodes.

How a node is split into children:

- The number of children ``k`` is the one with the best mean silhouette (cosine distance) of a
  spherical k-means clustering, among ``2..max_fanout``. A node with no clear structure (best
  silhouette below ``min_split_silhouette``) gets one child, unless it is too large.
- "Too large": a leaf should hold no more chunks than one query can read within its token budget
  (``leaf_capacity``), because a query reads a leaf's chunks in stored order, not by meaning.
  A node of ``m`` chunks with ``r`` levels left below it needs ``ceil(m / leaf_capacity)``
  leaves, so at least ``ceil(leaves ** (1 / r))`` children at this level.
- The cap: the whole tree has at most ``max_categories`` nodes. When the tree wanted is larger,
  it is rebuilt with twice the leaf capacity (fewer size-driven splits), then with stricter
  silhouettes, then with fewer top-level groups, until it fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "TreeNode",
    "TreeShape",
    "build_tree",
    "choose_k",
    "normalise_rows",
    "silhouette",
    "spherical_kmeans",
]

_SAMPLE = 600  # points used to choose k (silhouette is quadratic)
_MIN_CLUSTER = 2  # a child holds at least this many chunks when the node is split


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One category of the planned tree: its level (1..depth), parent node, and chunks."""

    level: int
    parent: int | None
    members: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TreeShape:
    """Nodes listed parents first (siblings largest first); ``leaf_of[i]`` is chunk i's leaf."""

    nodes: tuple[TreeNode, ...]
    leaf_of: tuple[int, ...]

    def children(self, node: int | None) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.parent == node]

    def path(self, node: int) -> list[int]:
        """Node indices from level 1 down to ``node``."""
        out = [node]
        while (parent := self.nodes[out[-1]].parent) is not None:
            out.append(parent)
        return out[::-1]


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)


def _plus_plus(vectors: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    n = len(vectors)
    chosen = [int(rng.integers(n))]
    closest = 1.0 - vectors @ vectors[chosen[0]]
    for _ in range(1, k):
        weights = np.clip(closest, 0.0, None) ** 2
        total = float(weights.sum())
        pick = int(rng.choice(n, p=weights / total)) if total > 0 else int(rng.integers(n))
        chosen.append(pick)
        closest = np.minimum(closest, 1.0 - vectors @ vectors[pick])
    return vectors[chosen].copy()


def spherical_kmeans(
    vectors: np.ndarray,
    k: int,
    *,
    seed: int = 0,
    iterations: int = 30,
    restarts: int = 3,
    init: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """k-means on unit vectors with cosine similarity; the best of ``restarts`` seeded runs.

    Returns:
        (labels, centroids): a label per row in ``0..k-1`` and ``k`` unit centroids.
    """
    n = len(vectors)
    k = max(1, min(k, n))
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for attempt in range(1 if init is not None else restarts):
        rng = np.random.default_rng(seed + attempt)
        centroids = init.copy() if init is not None else _plus_plus(vectors, k, rng)
        labels = np.zeros(n, dtype=np.int64)
        for _ in range(iterations):
            labels = np.argmax(vectors @ centroids.T, axis=1)
            membership = np.zeros((n, k), dtype=vectors.dtype)
            membership[np.arange(n), labels] = 1.0
            moved = membership.T @ vectors  # each cluster's sum, in one product
            sizes = membership.sum(axis=0)
            for j in np.flatnonzero(sizes == 0):  # an empty cluster takes the worst-fitting point
                fit = np.einsum("ij,ij->i", vectors, centroids[labels])
                moved[j] = vectors[int(np.argmin(fit))]
            moved = normalise_rows(moved)
            if np.allclose(moved, centroids, atol=1e-6):
                centroids = moved
                break
            centroids = moved
        labels = np.argmax(vectors @ centroids.T, axis=1)
        score = float(np.einsum("ij,ij->", vectors, centroids[labels]))
        if best is None or score > best[0] + 1e-9:
            best = (score, labels, centroids)
    assert best is not None
    return best[1], best[2]


def silhouette(vectors: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette with cosine distance (a point alone in its cluster scores 0)."""
    clusters = np.unique(labels)
    if len(clusters) < 2:
        return 0.0
    distances = 1.0 - vectors @ vectors.T
    own = np.searchsorted(clusters, labels)
    membership = np.zeros((len(labels), len(clusters)), dtype=distances.dtype)
    membership[np.arange(len(labels)), own] = 1.0
    sums = (distances @ membership).astype(np.float64)  # distance sums to each cluster
    sizes = membership.sum(axis=0).astype(np.float64)
    rows = np.arange(len(labels))
    own_size = sizes[own]
    inside = np.where(own_size > 1, sums[rows, own] / np.maximum(own_size - 1, 1), 0.0)
    means = sums / sizes
    means[rows, own] = np.inf
    nearest = means.min(axis=1)
    denominator = np.maximum(inside, nearest)
    scores = np.where(
        (own_size > 1) & (denominator > 0), (nearest - inside) / np.maximum(denominator, 1e-12), 0
    )
    return float(scores.mean())


def choose_k(
    vectors: np.ndarray,
    *,
    k_min: int,
    k_max: int,
    min_split_silhouette: float,
    seed: int = 0,
) -> int:
    """The number of clusters: the best silhouette among ``max(2, k_min)..k_max``; 1 when no
    split is needed (``k_min <= 1``) and none reaches ``min_split_silhouette``."""
    n = len(vectors)
    k_max = min(k_max, n // _MIN_CLUSTER)
    if k_max < 2:
        return 1
    if k_min > k_max:
        return k_max
    sample = vectors
    if n > _SAMPLE:
        rng = np.random.default_rng(seed)
        sample = vectors[np.sort(rng.choice(n, _SAMPLE, replace=False))]
    best_k, best_score = 1, -math.inf
    for k in range(max(2, k_min), k_max + 1):
        labels, _ = spherical_kmeans(sample, k, seed=seed)
        if len(np.unique(labels)) < k:
            continue
        score = silhouette(sample, labels)
        if score > best_score + 1e-9:
            best_k, best_score = k, score
    if best_score == -math.inf:
        return max(1, k_min)
    if k_min <= 1 and best_score < min_split_silhouette:
        return 1
    return best_k


def _split(
    vectors: np.ndarray,
    members: np.ndarray,
    *,
    levels_left: int,
    leaf_capacity: float,
    max_fanout: int,
    min_split_silhouette: float,
    seed: int,
) -> list[np.ndarray]:
    """The children of a node holding ``members``, largest first."""
    count = len(members)
    leaves_needed = math.ceil(count / leaf_capacity) if math.isfinite(leaf_capacity) else 1
    k_min = math.ceil(leaves_needed ** (1.0 / levels_left) - 1e-9) if leaves_needed > 1 else 1
    points = vectors[members]
    k = choose_k(
        points,
        k_min=k_min,
        k_max=max_fanout,
        min_split_silhouette=min_split_silhouette,
        seed=seed,
    )
    if k <= 1:
        return [members]
    labels, _ = spherical_kmeans(points, k, seed=seed)
    groups = [members[labels == j] for j in range(k)]
    groups = [g for g in groups if len(g)]
    return sorted(groups, key=lambda g: (-len(g), int(g.min())))


def _build(
    vectors: np.ndarray,
    depth: int,
    *,
    leaf_capacity: float,
    max_fanout: int,
    top_fanout: int,
    min_split_silhouette: float,
    seed: int,
) -> TreeShape:
    nodes: list[TreeNode] = []
    leaf_of = [0] * len(vectors)
    frontier: list[tuple[int | None, np.ndarray]] = [(None, np.arange(len(vectors)))]
    for level in range(1, depth + 1):
        next_frontier: list[tuple[int | None, np.ndarray]] = []
        for parent, members in frontier:
            groups = _split(
                vectors,
                members,
                levels_left=depth - level + 1,
                leaf_capacity=leaf_capacity,
                max_fanout=top_fanout if level == 1 else max_fanout,
                min_split_silhouette=min_split_silhouette,
                seed=seed + level,
            )
            for group in groups:
                nodes.append(TreeNode(level, parent, tuple(int(i) for i in sorted(group))))
                next_frontier.append((len(nodes) - 1, group))
        frontier = next_frontier
    for node_index, members in frontier:
        assert node_index is not None
        for i in members:
            leaf_of[int(i)] = node_index
    return TreeShape(tuple(nodes), tuple(leaf_of))


def build_tree(
    vectors: np.ndarray,
    *,
    depth: int,
    max_categories: int,
    leaf_capacity: int,
    max_fanout: int = 8,
    min_split_silhouette: float = 0.1,
    seed: int = 0,
) -> TreeShape:
    """Cluster ``vectors`` (one row per chunk) into a tree of ``depth`` levels.

    Every chunk gets a leaf at level ``depth``; the tree has at most ``max_categories`` nodes
    (at least ``depth`` are needed: one path).

    Raises:
        ValueError: no vectors, or ``max_categories`` below ``depth``.
    """
    if len(vectors) == 0:
        raise ValueError("no chunks to cluster")
    if max_categories < depth:
        raise ValueError(f"{max_categories} categories cannot hold a path of depth {depth}")
    unit = normalise_rows(vectors)
    capacity: float = max(1, leaf_capacity)
    silhouette_floor = min_split_silhouette
    top_fanout = max_fanout
    for _ in range(64):
        shape = _build(
            unit,
            depth,
            leaf_capacity=capacity,
            max_fanout=max_fanout,
            top_fanout=top_fanout,
            min_split_silhouette=silhouette_floor,
            seed=seed,
        )
        if len(shape.nodes) <= max_categories:
            return shape
        # Too many nodes: fewer size-driven splits first, then only the clearest splits, then
        # fewer top-level groups (k top-level chains of single children cost k * depth).
        if math.isfinite(capacity) and capacity < len(vectors):
            capacity *= 2
        elif math.isfinite(capacity):
            capacity = math.inf
        elif silhouette_floor < 0.5:
            silhouette_floor += 0.1
        else:
            top_fanout = max(1, min(top_fanout - 1, max_categories // depth))
    return _build(  # pragma: no cover - the loop always reaches one top-level chain
        unit,
        depth,
        leaf_capacity=math.inf,
        max_fanout=1,
        top_fanout=1,
        min_split_silhouette=1.0,
        seed=seed,
    )
