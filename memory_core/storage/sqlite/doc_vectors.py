"""Vectors for the in-process vector cache: a change stamp, and bulk loading.

sqlite-vec's vec0 KNN is brute force at about 1.4 µs per 384-dim vector on this machine
(~140 ms at 100k chunks); numpy does the same product in ~10 ms. A long-lived process (the
MCP server) therefore keeps a matrix per scope, and needs to know when it went stale: every
write path of the document side bumps ``chunk_vectors_generation`` in ``meta`` inside its own
transaction, and a re-embed recreates the vec0 table (``schema_version`` changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.storage.sqlite import items as item_sql

__all__ = [
    "GENERATION_KEY",
    "bump_generation",
    "count_vectors",
    "load_vectors",
    "matching_item_ids",
    "vector_stamp",
]

GENERATION_KEY = "chunk_vectors_generation"


def bump_generation(conn: Any) -> None:
    """Mark the chunk vectors changed (call inside the write transaction that changed them)."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        (GENERATION_KEY,),
    )


def vector_stamp(conn: Any) -> tuple[int, str]:
    """A value that changes whenever the chunk vectors may have changed."""
    schema = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (GENERATION_KEY,)).fetchone()
    return schema, str(row[0]) if row else "0"


def load_vectors(
    conn: Any, scope: str | None, kinds: Sequence[str]
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(item_ids, matrix)`` of every vector in ``scope`` / ``kinds``, ordered by item id."""
    dimension = item_sql.vector_table_dimension(conn)
    if dimension is None:
        return None
    where, params = [], []
    if scope is not None:
        where.append("scope = ?")
        params.append(scope)
    if kinds:
        where.append(f"kind IN ({','.join('?' * len(kinds))})")
        params.extend(kinds)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(
        f"SELECT item_id, embedding FROM {item_sql.VEC_TABLE} {clause} ORDER BY item_id", params
    ).fetchall()
    ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
    if not rows:
        return ids, np.zeros((0, dimension), dtype=np.float32)
    matrix = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32)
    return ids, matrix.reshape(len(rows), dimension)


def count_vectors(conn: Any) -> int:
    """Vectors stored in all (the vec0 row-id shadow table is an ordinary, cheap table)."""
    if item_sql.vector_table_dimension(conn) is None:
        return 0
    return int(conn.execute(f"SELECT count(*) FROM {item_sql.VEC_TABLE}_rowids").fetchone()[0])


def matching_item_ids(
    conn: Any, scope: str | None, kinds: Sequence[str], where: str, params: Sequence[Any]
) -> np.ndarray:
    """Ids of live items in scope / kinds that satisfy the filter fragment, sorted."""
    from memory_core.storage.sqlite.doc_filters import register_functions

    register_functions(conn)
    clauses, args = ["item.deleted = 0"], []
    if scope is not None:
        clauses.append("item.scope = ?")
        args.append(scope)
    if kinds:
        clauses.append(f"item.kind IN ({','.join('?' * len(kinds))})")
        args.extend(kinds)
    if "item." not in where:
        # A filter over document fields only: evaluate it once per document, not per chunk.
        resources = [
            int(r[0])
            for r in conn.execute(
                f"SELECT resource.resource_id FROM resource WHERE {where}", list(params)
            )
        ]
        rows = []
        for start in range(0, len(resources), 500):
            batch = resources[start : start + 500]
            rows.extend(
                conn.execute(
                    # Without INDEXED BY the planner prefers (scope, kind) and scans them all.
                    f"SELECT item.item_id FROM item INDEXED BY item_resource WHERE item.resource_id IN "
                    f"({','.join('?' * len(batch))}) AND {' AND '.join(clauses)}",
                    [*batch, *args],
                ).fetchall()
            )
        ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        ids.sort()
        return ids
    else:
        rows = conn.execute(
            "SELECT item.item_id FROM item LEFT JOIN resource "
            "ON resource.resource_id = item.resource_id "
            f"WHERE {' AND '.join(clauses)} AND ({where}) ORDER BY item.item_id",
            [*args, *params],
        ).fetchall()
    return np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
