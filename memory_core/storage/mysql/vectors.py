"""The vector index on MySQL / MariaDB: float32 blobs in ``item_vec``, searched exactly.

MariaDB before 11.7 and MySQL 8 have no vector type or index, so the search reads the blobs of
the rows that match scope, kinds and filter (one statement) and scores every one of them
(cosine similarity, ties broken by item id): exact, and linear in the matching rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.filters import Filter
from memory_core.kinds import ItemKind, check_item_kind
from memory_core.models import ScoredId
from memory_core.scope import Scope
from memory_core.storage.mysql.items import EMBEDDING_DIM_KEY, meta_value
from memory_core.storage.ports import VectorHits
from memory_core.storage.server.dialect import MYSQL
from memory_core.storage.server.filter_sql import compile_filter, scope_kind_where
from memory_core.storage.server.items import VECTOR_GENERATION_KEY, check_dimension

__all__ = ["MyVectors", "cosine_top"]


def _matrix(blobs: Sequence[bytes], dimension: int) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dimension), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), -1).astype(np.float32)


def cosine_top(query: np.ndarray, ids: np.ndarray, matrix: np.ndarray, k: int) -> list[ScoredId]:
    """The ``k`` rows most similar to ``query`` (cosine), best first, ties by id."""
    if not len(ids):
        return []
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    scores = (matrix @ query) / np.maximum(norms, 1e-12)
    order = np.lexsort((ids, -scores))[:k]
    return [ScoredId(int(ids[i]), float(scores[i])) for i in order]


class MyVectors:
    """:class:`~memory_core.storage.ports.VectorIndex` on one MySQL / MariaDB connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    @property
    def dimension(self) -> int | None:
        value = meta_value(self._conn, EMBEDDING_DIM_KEY)
        return None if value is None else int(value)

    def search(
        self,
        vector: np.ndarray,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        k: int = 50,
    ) -> VectorHits:
        dimension = self.dimension
        if k <= 0 or dimension is None:
            return VectorHits([], "none")
        query = check_dimension(vector, dimension)
        if where is None:
            clauses, params = ["1 = 1"], []
            if scope is not None:
                clauses.append("v.scope = %s")
                params.append(scope.key)
            if kinds:
                clause, more = MYSQL.in_list("v.kind", [check_item_kind(k) for k in kinds])
                clauses.append(clause)
                params += more
            source = f"FROM item_vec AS v WHERE {' AND '.join(clauses)}"
        else:
            clause, params = scope_kind_where(scope.key if scope else None, list(kinds))
            compiled = compile_filter(where, MYSQL)
            params.extend(compiled.params)
            source = (
                "FROM item_vec AS v JOIN item ON item.item_id = v.item_id "
                "LEFT JOIN resource ON resource.resource_id = item.resource_id "
                f"WHERE {clause} AND ({compiled.sql})"
            )
        rows = self._conn.execute(f"SELECT v.item_id, v.embedding {source}", params).fetchall()
        ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        hits = cosine_top(query, ids, _matrix([r[1] for r in rows], dimension), int(k))
        return VectorHits(hits, "exact" if where is None else "exact+filter")

    def vectors(self, item_ids: Sequence[int]) -> dict[int, np.ndarray]:
        ids = list(dict.fromkeys(int(i) for i in item_ids))
        if not ids or self.dimension is None:
            return {}
        where, params = MYSQL.in_list("item_id", ids)
        rows = self._conn.execute(f"SELECT item_id, embedding FROM item_vec WHERE {where}", params)
        return {int(r[0]): np.frombuffer(r[1], dtype="<f4").astype(np.float32) for r in rows}

    def load(
        self, scope: Scope | None, kinds: Sequence[ItemKind] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        dimension = self.dimension
        if dimension is None:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        clauses, params = ["1 = 1"], []
        if scope is not None:
            clauses.append("scope = %s")
            params.append(scope.key)
        if kinds:
            clause, more = MYSQL.in_list("kind", list(kinds))
            clauses.append(clause)
            params += more
        rows = self._conn.execute(
            f"SELECT item_id, embedding FROM item_vec WHERE {' AND '.join(clauses)} "
            "ORDER BY item_id",
            params,
        ).fetchall()
        ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        return ids, _matrix([r[1] for r in rows], dimension)

    def count(self, scope: Scope | None = None) -> int:
        if scope is None:
            row = self._conn.execute("SELECT count(*) FROM item_vec").fetchone()
        else:
            row = self._conn.execute(
                "SELECT count(*) FROM item_vec WHERE scope = %s", (scope.key,)
            ).fetchone()
        return int(row[0]) if row else 0

    def stamp(self, scope: Scope | None = None) -> str:
        key = VECTOR_GENERATION_KEY if scope is None else f"{VECTOR_GENERATION_KEY}:{scope.key}"
        generation = meta_value(self._conn, key)
        return f"{self.dimension or 0}:{generation or 0}"
