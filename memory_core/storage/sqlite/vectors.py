"""The vector index on SQLite: sqlite-vec's ``vec0`` table ``item_vec``.

Scope is the vec0 partition key and kind a metadata column, so both filter inside the KNN
(no starvation when one kind is rare). Any other filter cannot run inside vec0's KNN: the
search over-fetches and post-filters, and when the filter is too selective for that, scores
every matching item exactly. Similarity is ``1 - cosine distance``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import ScoredId
from memory_core.scope import Scope
from memory_core.storage.ports import VectorHits
from memory_core.storage.sqlite.filter_sql import compile_filter, register_functions
from memory_core.storage.sqlite.items import (
    VEC_TABLE,
    VECTOR_GENERATION_KEY,
    scope_kind_where,
    vector_blob,
    vector_table_dimension,
)

__all__ = ["EXACT_VECTOR_LIMIT", "SqliteVectors", "matching_item_ids", "vector_stamp"]

# Beyond this many filter matches, exact scoring (vec0 point lookups, ~0.2 ms each) costs more
# than the widest KNN over-fetch.
EXACT_VECTOR_LIMIT = 2_000
_KNN_MAX = 4096  # sqlite-vec's cap on k
_OVERFETCH = 10


def vector_stamp(conn: Any, scope: Scope | None = None) -> str:
    """Changes whenever a vector of ``scope`` (None: any) may have changed: the schema version
    (a re-embed recreates the table) and the generation the write paths bump."""
    schema = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    key = VECTOR_GENERATION_KEY if scope is None else f"{VECTOR_GENERATION_KEY}:{scope.key}"
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return f"{schema}:{row[0] if row else 0}"


def matching_item_ids(
    conn: Any, scope: Scope | None, kinds: Sequence[str], where: Filter
) -> np.ndarray:
    """Ids of live items in scope / kinds that satisfy the filter, sorted ascending."""
    compiled = compile_filter(where)
    if compiled.needs_glob:
        register_functions(conn)
    clause, args = scope_kind_where(scope, kinds)
    if compiled.resource_only:
        # A filter over resource fields only: evaluated once per resource, not per item.
        resources = [
            int(r[0])
            for r in conn.execute(
                f"SELECT resource.resource_id FROM resource WHERE {compiled.sql}",
                list(compiled.params),
            )
        ]
        rows: list[Any] = []
        for start in range(0, len(resources), 500):
            batch = resources[start : start + 500]
            rows.extend(
                conn.execute(
                    # Without INDEXED BY the planner prefers (scope, kind) and scans them all.
                    "SELECT item.item_id FROM item INDEXED BY item_resource "
                    f"WHERE item.resource_id IN ({','.join('?' * len(batch))}) AND {clause}",
                    [*batch, *args],
                ).fetchall()
            )
        ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        ids.sort()
        return ids
    rows = conn.execute(
        "SELECT item.item_id FROM item LEFT JOIN resource "
        "ON resource.resource_id = item.resource_id "
        f"WHERE {clause} AND ({compiled.sql}) ORDER BY item.item_id",
        [*args, *compiled.params],
    ).fetchall()
    return np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))


class SqliteVectors:
    """:class:`~memory_core.storage.ports.VectorIndex` on one SQLite connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    @property
    def dimension(self) -> int | None:
        return vector_table_dimension(self._conn)

    def _knn(
        self, vector: np.ndarray, scope: Scope | None, kinds: Sequence[str], k: int
    ) -> list[ScoredId]:
        dimension = self.dimension
        if dimension is None:
            return []
        where = ["embedding MATCH ?", "k = ?"]
        params: list[Any] = [vector_blob(vector, dimension), max(1, min(int(k), _KNN_MAX))]
        if scope is not None:
            where.append("scope = ?")
            params.append(scope.key)
        if kinds:
            where.append(f"kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        rows = self._conn.execute(
            f"SELECT item_id, distance FROM {VEC_TABLE} WHERE {' AND '.join(where)} "
            "ORDER BY distance",
            params,
        ).fetchall()
        # vec0 allows only ORDER BY distance; ties are broken by id so results are stable.
        rows.sort(key=lambda r: (r[1], r[0]))
        return [ScoredId(int(r[0]), 1.0 - float(r[1])) for r in rows]

    def _exact(self, vector: np.ndarray, ids: Sequence[int], k: int) -> list[ScoredId]:
        found = self.vectors(ids)
        if not found:
            return []
        order = list(found)
        matrix = np.vstack([found[i] for i in order])
        sims = matrix @ np.asarray(vector, dtype=np.float32)
        ranked = sorted(range(len(order)), key=lambda i: (-float(sims[i]), order[i]))[:k]
        return [ScoredId(order[i], float(sims[i])) for i in ranked]

    def search(
        self,
        vector: np.ndarray,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        k: int = 50,
    ) -> VectorHits:
        if k <= 0:
            return VectorHits([], "none")
        if where is None:
            return VectorHits(self._knn(vector, scope, kinds, k), "knn")
        fetch = min(_KNN_MAX, max(k * _OVERFETCH, 100))
        raw = self._knn(vector, scope, kinds, fetch)
        allowed = set(matching_item_ids(self._conn, scope, kinds, where).tolist())
        hits = [h for h in raw if h.item_id in allowed]
        if len(hits) >= k or len(raw) < fetch:
            return VectorHits(hits[:k], "knn+filter")
        if len(allowed) > EXACT_VECTOR_LIMIT:
            return VectorHits(hits[:k], "knn+filter")
        # Too selective for the over-fetch: score every matching item exactly.
        return VectorHits(self._exact(vector, sorted(allowed), k), "exact+filter")

    def vectors(self, item_ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not item_ids or self.dimension is None:
            return {}
        found: dict[int, np.ndarray] = {}
        unique = list(dict.fromkeys(int(i) for i in item_ids))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            marks = ",".join("?" * len(batch))
            for item_id, blob in self._conn.execute(
                f"SELECT item_id, embedding FROM {VEC_TABLE} WHERE item_id IN ({marks})", batch
            ):
                found[int(item_id)] = np.frombuffer(bytes(blob), dtype=np.float32)
        return found

    def load(
        self, scope: Scope | None, kinds: Sequence[ItemKind] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        dimension = self.dimension
        if dimension is None:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        where, params = [], []
        if scope is not None:
            where.append("scope = ?")
            params.append(scope.key)
        if kinds:
            where.append(f"kind IN ({','.join('?' * len(kinds))})")
            params.extend(kinds)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self._conn.execute(
            f"SELECT item_id, embedding FROM {VEC_TABLE} {clause} ORDER BY item_id", params
        ).fetchall()
        ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, dimension), dtype=np.float32)
        matrix = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32)
        return ids, matrix.reshape(len(rows), dimension)

    def count(self, scope: Scope | None = None) -> int:
        if self.dimension is None:
            return 0
        if scope is None:
            # The vec0 row-id shadow table is an ordinary, cheap table.
            return int(self._conn.execute(f"SELECT count(*) FROM {VEC_TABLE}_rowids").fetchone()[0])
        return int(
            self._conn.execute(
                f"SELECT count(*) FROM {VEC_TABLE} WHERE scope = ?", (scope.key,)
            ).fetchone()[0]
        )

    def stamp(self, scope: Scope | None = None) -> str:
        return vector_stamp(self._conn, scope)
