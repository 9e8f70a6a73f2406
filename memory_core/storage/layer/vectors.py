"""Brute-force vectors kept in memory by the in-memory and SQLite layer stores: one growing
matrix per selector searched, updated row by row as items are written."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["VectorBlock", "inner_products"]


def _rowwise(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    products: np.ndarray = np.einsum("ij,j->i", matrix, vector)  # numpy < 2: no BLAS threads
    return products


_VECDOT: Callable[[np.ndarray, np.ndarray], np.ndarray] = getattr(np, "vecdot", _rowwise)


def inner_products(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` without BLAS threads.

    ``@`` is a BLAS gemv, which OpenBLAS spreads over every core: on a busy two-core machine
    the threads' start and wait cost more than the product (1,600 x 384: 4-6 ms instead of
    0.15 ms single-threaded). ``np.vecdot`` is one single-threaded BLAS dot per row, as fast as
    a single-threaded gemv and faster at 10k+ rows (bench/bench_layer_vectors.py), with no
    thread-pool setting to change around the call (threadpoolctl would be a new dependency and
    a process-wide switch).
    """
    return _VECDOT(matrix, vector)


class VectorBlock:
    """The vectors of one selector in insertion order, in a buffer that grows by doubling:
    a write appends or overwrites one row instead of rebuilding the matrix."""

    def __init__(self, dim: int) -> None:
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._buffer = np.zeros((16, dim), dtype=np.float32)

    def __len__(self) -> int:
        return len(self._ids)

    def put(self, item_id: str, vector: np.ndarray) -> None:
        at = self._row.get(item_id)
        if at is None:
            at = len(self._ids)
            if at == len(self._buffer):
                grown = np.zeros((2 * at, self._buffer.shape[1]), dtype=np.float32)
                grown[:at] = self._buffer
                self._buffer = grown
            self._ids.append(item_id)
            self._row[item_id] = at
        self._buffer[at] = vector

    def drop(self, item_id: str) -> None:
        at = self._row.pop(item_id, None)
        if at is None:
            return
        n = len(self._ids)
        self._buffer[at : n - 1] = self._buffer[at + 1 : n]
        del self._ids[at]
        for moved in self._ids[at:]:
            self._row[moved] -= 1

    def top(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` best ids by inner product with ``vector``, best first (ties in insertion
        order). Call it under the owner's lock."""
        ids, matrix = self._ids, self._buffer[: len(self._ids)]
        if not ids:
            return []
        scores = inner_products(matrix, np.asarray(vector, dtype=np.float32))
        if k < len(ids):
            part = np.argpartition(-scores, k - 1)[:k]
            top = part[np.argsort(-scores[part], kind="stable")]
        else:
            top = np.argsort(-scores, kind="stable")
        return [(ids[i], float(scores[i])) for i in top]
