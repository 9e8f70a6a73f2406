"""The vector index on PostgreSQL: pgvector's ``item_vec`` with an HNSW index (cosine).

Scope, kinds and any filter are conditions of the same statement as the nearest-neighbour
ORDER BY, and the HNSW scan is iterative (``hnsw.iterative_scan = relaxed_order``), so it keeps
walking the graph until ``k`` rows pass. When it gives up before that (the scan limit) while
more rows match, the search scores every matching row exactly instead: a filter never starves
the result. Similarity is ``1 - cosine distance``; ties are broken by item id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from memory_core.filters import Filter
from memory_core.kinds import ItemKind, check_item_kind
from memory_core.models import ScoredId
from memory_core.scope import Scope
from memory_core.storage.ports import VectorHits
from memory_core.storage.postgres.filter_sql import compile_filter, scope_kind_where
from memory_core.storage.postgres.items import vector_dimension, vector_value

__all__ = ["PgVectors", "create_vector_table", "vector_stamp"]

Conn = psycopg.Connection[Any]
# Exact scoring below this many candidate rows: cheaper than walking the graph, and exact.
EXACT_BELOW = 2_000
HNSW_EF_SEARCH = 400


def create_vector_table(conn: Conn, dimension: int) -> None:
    """(Re)create ``item_vec`` at ``dimension`` with its HNSW and (scope, kind) indexes."""
    conn.execute("DROP TABLE IF EXISTS item_vec")
    conn.execute(
        "CREATE TABLE item_vec (item_id BIGINT PRIMARY KEY REFERENCES item(item_id), "
        'scope TEXT COLLATE "C" NOT NULL, kind TEXT COLLATE "C" NOT NULL, '
        f"embedding vector({int(dimension)}) NOT NULL)"
    )
    conn.execute("CREATE INDEX item_vec_scope_kind ON item_vec (scope, kind)")
    conn.execute("CREATE INDEX item_vec_hnsw ON item_vec USING hnsw (embedding vector_cosine_ops)")


def vector_stamp(conn: Conn, scope: Scope | None = None) -> str:
    """Changes whenever a vector of ``scope`` (None: any) may have changed: the table's
    identity (a re-embed recreates it) and the sum of the generations the write paths bump
    (per scope and slot; every bump adds one, so the sum only grows)."""
    where, params = ("", ()) if scope is None else ("WHERE scope = %s", (scope.key,))
    row = conn.execute(
        "SELECT to_regclass('item_vec')::oid, "
        f"(SELECT coalesce(sum(generation), 0) FROM vector_generation {where})",
        params,
    ).fetchone()
    assert row is not None
    return f"{row[0] or 0}:{row[1]}"


class PgVectors:
    """:class:`~memory_core.storage.ports.VectorIndex` on one PostgreSQL connection."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    @property
    def dimension(self) -> int | None:
        return vector_dimension(self._conn)

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
        dimension = self._prepare_scan(k)
        if dimension is None:
            return VectorHits([], "none")
        query = vector_value(vector, dimension)
        params: list[Any] = []
        if where is None:
            # Scope and kind are columns of item_vec (as vec0's partition key and metadata
            # column on SQLite): the HNSW scan filters them without reading items.
            clauses = ["true"]
            if scope is not None:
                clauses.append("v.scope = %s")
                params.append(scope.key)
            if kinds:
                clauses.append("v.kind = ANY(%s)")
                params.append([check_item_kind(k) for k in kinds])
            source = f"FROM item_vec AS v WHERE {' AND '.join(clauses)}"
        else:
            clause, params = scope_kind_where(scope.key if scope else None, list(kinds))
            compiled = compile_filter(where)
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
            source = (
                "FROM item_vec AS v JOIN item ON item.item_id = v.item_id "
                f"LEFT JOIN resource ON resource.resource_id = item.resource_id WHERE {clause}"
            )
            if scope is not None:
                source += " AND v.scope = %s"
                params.append(scope.key)
        strategy = "hnsw+filter" if where is not None else "hnsw"
        rows: list[Any] = []
        if where is not None:
            # A selective filter: count its matches first (cheap) and score them exactly.
            matches = self._conn.execute(
                f"SELECT count(*) FROM (SELECT 1 {source} LIMIT {EXACT_BELOW}) AS m", params
            ).fetchone()
            if matches is not None and int(matches[0]) < EXACT_BELOW:
                strategy = "exact+filter"
        if strategy != "exact+filter":
            rows = self._conn.execute(
                f"SELECT v.item_id, v.embedding <=> %s AS distance {source} "
                "ORDER BY v.embedding <=> %s LIMIT %s",
                (query, *params, query, int(k)),
            ).fetchall()
            if len(rows) < k:
                # The iterative scan stopped early; are there rows it did not reach?
                total = self._conn.execute(f"SELECT count(*) {source}", params).fetchone()
                if total is not None and int(total[0]) > len(rows):
                    strategy = "exact+filter" if where is not None else "exact"
        if strategy.startswith("exact"):
            # ``+ 0`` keeps the planner off the HNSW index: every matching row is scored.
            rows = self._conn.execute(
                f"SELECT v.item_id, (v.embedding <=> %s) + 0 AS distance {source} "
                "ORDER BY distance, v.item_id LIMIT %s",
                (query, *params, int(k)),
            ).fetchall()
        ranked = sorted((float(r[1]), int(r[0])) for r in rows)
        return VectorHits([ScoredId(i, 1.0 - d) for d, i in ranked], strategy)

    def _prepare_scan(self, k: int) -> int | None:
        """Set this transaction's HNSW scan options and read the vector dimension, in one
        statement (a round trip saved on every search). The options only steer the graph
        walk; the exact fallbacks do not use the index."""
        # The candidate list of the graph walk: pgvector's default (40) finds about half of
        # the true top 10 on high-dimensional data without clusters (bench/bench_pg.py);
        # 400 finds about 95 % of it.
        ef_search = max(HNSW_EF_SEARCH, min(1000, 4 * int(k)))
        row = self._conn.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.ef_search', %s, true), "
            "(SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('item_vec') "
            "AND attname = 'embedding')",
            (str(ef_search),),
        ).fetchone()
        return None if row is None or row[2] is None else int(row[2])

    def vectors(self, item_ids: Sequence[int]) -> dict[int, np.ndarray]:
        ids = list(dict.fromkeys(int(i) for i in item_ids))
        if not ids or self.dimension is None:
            return {}
        rows = self._conn.execute(
            "SELECT item_id, embedding FROM item_vec WHERE item_id = ANY(%s)", (ids,)
        )
        return {int(r[0]): r[1] for r in rows}

    def load(
        self, scope: Scope | None, kinds: Sequence[ItemKind] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        dimension = self.dimension
        if dimension is None:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        where: list[str] = []
        params: list[Any] = []
        if scope is not None:
            where.append("scope = %s")
            params.append(scope.key)
        if kinds:
            where.append("kind = ANY(%s)")
            params.append(list(kinds))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._conn.cursor(binary=True) as cur:
            rows = cur.execute(
                f"SELECT item_id, embedding FROM item_vec {clause} ORDER BY item_id", params
            ).fetchall()
        ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, dimension), dtype=np.float32)
        return ids, np.vstack([r[1] for r in rows]).astype(np.float32)

    def count(self, scope: Scope | None = None) -> int:
        if self.dimension is None:
            return 0
        if scope is None:
            row = self._conn.execute("SELECT count(*) FROM item_vec").fetchone()
        else:
            row = self._conn.execute(
                "SELECT count(*) FROM item_vec WHERE scope = %s", (scope.key,)
            ).fetchone()
        return int(row[0]) if row else 0

    def stamp(self, scope: Scope | None = None) -> str:
        return vector_stamp(self._conn, scope)
