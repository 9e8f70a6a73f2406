"""An in-process matrix of a scope's vectors: the SQLite vector index's private fast path.

sqlite-vec's brute-force KNN costs about 1.4 µs per vector here (~140 ms at 100k items); the
same product in numpy takes ~10 ms. A long-lived process keeps a matrix per (scope, kinds)
and uses it only while it is provably fresh: the store's vector stamp for that scope (schema
version plus a generation every vector write bumps in its own transaction) must equal the one
read with the vectors. A stale or missing matrix is rebuilt in a background thread on its own
connection while searches keep using vec0, so the cache never serves a removed or outdated
vector and never blocks a search. :meth:`VectorCache.put` installs a matrix loaded by the
caller (``Store.prepare_vectors``), which also works for in-memory databases.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog

from memory_core.models import ScoredId

__all__ = ["CacheKey", "CachedVectors", "VectorCache", "similarities_from", "top_k"]

log = structlog.get_logger(__name__)

CacheKey = tuple[str | None, tuple[str, ...]]  # (scope key or None for all, sorted kinds)


@dataclass(frozen=True)
class CachedVectors:
    """One scope's vectors: ``ids`` ascending; ``matrix`` row i is the vector of ``ids[i]``."""

    stamp: str
    ids: np.ndarray
    matrix: np.ndarray

    def row_of(self, item_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(found ids, their rows)`` for the ids present in the matrix."""
        wanted = np.asarray(sorted(set(item_ids)), dtype=np.int64)
        rows = np.searchsorted(self.ids, wanted)
        rows = np.clip(rows, 0, max(0, len(self.ids) - 1))
        present = (len(self.ids) > 0) & (self.ids[rows] == wanted) if len(wanted) else rows[:0]
        return wanted[present], rows[present]


def top_k(
    entry: CachedVectors, query: np.ndarray, k: int, allowed: np.ndarray | None
) -> list[ScoredId]:
    """Nearest ``k`` by cosine similarity (rows are unit vectors), ties by item id.

    Args:
        allowed: sorted item ids the hits must come from (a filter), or None.
    """
    ids, matrix = entry.ids, entry.matrix
    if allowed is not None:
        rows = np.nonzero(np.isin(ids, allowed, assume_unique=True))[0]
        ids, matrix = ids[rows], matrix[rows]
    if len(ids) == 0 or k <= 0:
        return []
    # einsum, not ``@``: a matrix-vector product is memory-bound, and BLAS wakes its thread
    # pool for it, which next to a busy ONNX pool costs milliseconds even at 2,000 rows.
    sims = np.einsum("ij,j->i", matrix, np.asarray(query, dtype=np.float32))
    if k < len(ids):
        # A margin past k so equal similarities at the cut are ordered by id below.
        part = np.argpartition(-sims, min(len(ids) - 1, k))[: k + 1]
    else:
        part = np.arange(len(ids))
    order = sorted(part.tolist(), key=lambda i: (-float(sims[i]), int(ids[i])))[:k]
    return [ScoredId(int(ids[i]), float(sims[i])) for i in order]


def similarities_from(
    entry: CachedVectors, query: np.ndarray, item_ids: Sequence[int]
) -> dict[int, float]:
    found, rows = entry.row_of(item_ids)
    if len(found) == 0:
        return {}
    sims = np.einsum("ij,j->i", entry.matrix[rows], np.asarray(query, dtype=np.float32))
    return {int(i): float(s) for i, s in zip(found.tolist(), sims.tolist(), strict=True)}


class VectorCache:
    """Matrices per (scope, kinds), rebuilt in the background when the store changes."""

    def __init__(self, *, min_items: int, max_items: int) -> None:
        self.min_items = min_items
        self.max_items = max_items
        self._entries: dict[CacheKey, CachedVectors] = {}
        self._building: set[CacheKey] = set()
        self._lock = threading.Lock()

    def get(self, key: CacheKey, stamp: str) -> CachedVectors | None:
        entry = self._entries.get(key)
        return entry if entry is not None and entry.stamp == stamp else None

    def put(self, key: CacheKey, entry: CachedVectors) -> None:
        if len(entry.ids) <= self.max_items:
            self._entries[key] = entry

    def drop(self) -> None:
        self._entries.clear()

    def start_build(self, key: CacheKey, build: Callable[[], CachedVectors | None]) -> None:
        """Run ``build`` (which opens its own connection) in a daemon thread, once per key."""
        with self._lock:
            if key in self._building:
                return
            self._building.add(key)

        def run() -> None:
            try:
                entry = build()
                if entry is not None:
                    self.put(key, entry)
                    log.debug("vector cache built", scope=key[0], vectors=len(entry.ids))
            except Exception as exc:  # a cache must never break search; vec0 keeps serving
                log.warning("vector cache build failed", error=str(exc)[:200])
            finally:
                with self._lock:
                    self._building.discard(key)

        threading.Thread(target=run, name="memoir-vector-cache", daemon=True).start()


def load_entry(
    conn: Any, key: CacheKey, stamp_of: Callable[[Any], str], load: Any
) -> CachedVectors:
    """Read a stamp and the vectors in one read transaction (they belong to one snapshot)."""
    conn.execute("BEGIN")
    try:
        stamp = stamp_of(conn)
        ids, matrix = load(conn)
    finally:
        with contextlib.suppress(Exception):
            conn.execute("COMMIT")
    return CachedVectors(stamp, ids, np.ascontiguousarray(matrix, dtype=np.float32))
