"""SQL for the arms of the hybrid search, with filters applied inside each arm.

A filter must never starve results: the lexical arm puts the filter in its own statement,
and the vector arm (sqlite-vec cannot evaluate an arbitrary filter inside its KNN) over-fetches
and post-filters, falling back to exact scoring of every matching item when the over-fetch
does not yield enough. Each arm stays its own statement (DESIGN §7).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_core.models import ScoredId
from memory_core.storage.sqlite import items as item_sql
from memory_core.storage.sqlite.doc_filters import register_functions

__all__ = [
    "EXACT_VECTOR_LIMIT",
    "LexicalOutcome",
    "filter_item_ids",
    "lexical_arm",
    "structured_rows",
    "vector_arm",
]

# Beyond this many filter matches, exact scoring (vec0 point lookups, ~0.2 ms each) costs more
# than the widest KNN over-fetch.
EXACT_VECTOR_LIMIT = 2_000
_KNN_MAX = 4096

FilterSql = tuple[str, list[Any]] | None


class LexicalOutcome:
    """What the lexical arm did: its hits, the operator used and any warning."""

    __slots__ = ("hits", "operator", "warning")

    def __init__(self, hits: list[ScoredId], operator: str, warning: str | None) -> None:
        self.hits = hits
        self.operator = operator
        self.warning = warning


def _is_fts_syntax_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return type(exc).__name__ == "OperationalError" and ("fts5" in text or "syntax" in text)


def _scope_clause(scope: str | None, kinds: Sequence[str]) -> tuple[str, list[Any]]:
    clauses, args = ["item.deleted = 0"], []
    if scope is not None:
        clauses.append("item.scope = ?")
        args.append(scope)
    if kinds:
        clauses.append(f"item.kind IN ({','.join('?' * len(kinds))})")
        args.extend(kinds)
    return " AND ".join(clauses), args


def _keep(
    conn: Any, ids: list[int], scope: str | None, kinds: Sequence[str], flt: FilterSql
) -> set[int]:
    where, args = _scope_clause(scope, kinds)
    extra, extra_args = flt if flt else ("1", [])
    keep: set[int] = set()
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        keep.update(
            int(r[0])
            for r in conn.execute(
                "SELECT item.item_id FROM item LEFT JOIN resource "
                "ON resource.resource_id = item.resource_id "
                f"WHERE item.item_id IN ({marks}) AND {where} AND ({extra})",
                [*batch, *args, *extra_args],
            )
        )
    return keep


def _run_lexical(
    conn: Any, match: str, scope: str | None, kinds: Sequence[str], limit: int, flt: FilterSql
) -> list[ScoredId]:
    """bm25 top ``limit`` among the items that pass scope, kind and filter.

    FTS5 ranks on its own (one pass over the posting lists, no row lookups), and the ranked
    rows are checked against scope, kind and filter in batches until ``limit`` pass. Joining
    ``item`` into the MATCH statement instead lets SQLite scan ``item`` and probe FTS per row,
    which costs seconds at 10k items.
    """
    cursor = conn.execute(
        "SELECT rowid, bm25(item_fts) AS r FROM item_fts WHERE item_fts MATCH ? ORDER BY r, rowid",
        (match,),
    )
    hits: list[ScoredId] = []
    batch = max(limit * 2, 64)
    while len(hits) < limit:
        rows = cursor.fetchmany(batch)
        if not rows:
            break
        keep = _keep(conn, [int(r[0]) for r in rows], scope, kinds, flt)
        hits.extend(ScoredId(int(r[0]), float(r[1])) for r in rows if int(r[0]) in keep)
        batch = min(batch * 4, 4096)
    cursor.close()
    return hits[:limit]


def lexical_arm(
    conn: Any,
    *,
    and_match: str | None,
    or_match: str | None,
    fallback_match: str | None,
    scope: str | None,
    kinds: Sequence[str],
    limit: int,
    enough: int,
    flt: FilterSql = None,
) -> LexicalOutcome:
    """bm25 hits: the AND query first, the OR query when AND finds fewer than ``enough``.

    An FTS5 syntax error (only possible with hand-written MATCH text) is retried once with the
    sanitised literal ``fallback_match`` and reported as a warning.
    """
    if flt:
        register_functions(conn)
    if and_match is None and or_match is None:
        return LexicalOutcome([], "none", None)
    try:
        hits: list[ScoredId] = []
        operator = "AND"
        if and_match is not None:
            hits = _run_lexical(conn, and_match, scope, kinds, limit, flt)
        if len(hits) < enough and or_match is not None and or_match != and_match:
            hits = _run_lexical(conn, or_match, scope, kinds, limit, flt)
            operator = "OR"
        return LexicalOutcome(hits, operator, None)
    except Exception as exc:
        if not _is_fts_syntax_error(exc) or not fallback_match:
            raise
        hits = _run_lexical(conn, fallback_match, scope, kinds, limit, flt)
        return LexicalOutcome(
            hits,
            "OR",
            f"the lexical query did not parse ({exc}); retried as a sanitised literal query",
        )


def filter_item_ids(conn: Any, item_ids: Sequence[int], flt: FilterSql) -> set[int]:
    """The subset of ``item_ids`` that satisfy the filter."""
    if not flt:
        return set(item_ids)
    register_functions(conn)
    where, params = flt
    keep: set[int] = set()
    ids = list(item_ids)
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        keep.update(
            int(r[0])
            for r in conn.execute(
                "SELECT item.item_id FROM item LEFT JOIN resource "
                "ON resource.resource_id = item.resource_id "
                f"WHERE item.item_id IN ({marks}) AND ({where})",
                [*batch, *params],
            )
        )
    return keep


def _matching_ids(
    conn: Any, scope: str | None, kinds: Sequence[str], flt: tuple[str, list[Any]], cap: int
) -> list[int]:
    where, params = flt
    clauses, args = ["item.deleted = 0"], []
    if scope is not None:
        clauses.append("item.scope = ?")
        args.append(scope)
    if kinds:
        clauses.append(f"item.kind IN ({','.join('?' * len(kinds))})")
        args.extend(kinds)
    rows = conn.execute(
        "SELECT item.item_id FROM item LEFT JOIN resource "
        "ON resource.resource_id = item.resource_id "
        f"WHERE {' AND '.join(clauses)} AND ({where}) LIMIT ?",
        [*args, *params, cap + 1],
    ).fetchall()
    return [int(r[0]) for r in rows]


def _exact(conn: Any, query: np.ndarray, ids: list[int], k: int) -> list[ScoredId]:
    from memory_core.storage.sqlite.documents import vectors_for

    found, matrix = vectors_for(conn, ids)
    if not found or matrix is None:
        return []
    distances = 1.0 - matrix @ np.asarray(query, dtype=np.float32)
    order = sorted(range(len(found)), key=lambda i: (float(distances[i]), found[i]))[:k]
    return [ScoredId(found[i], float(distances[i])) for i in order]


def vector_arm(
    conn: Any,
    query: np.ndarray,
    *,
    scope: str | None,
    kinds: Sequence[str],
    k: int,
    flt: FilterSql = None,
    overfetch: int = 10,
) -> tuple[list[ScoredId], str]:
    """Nearest items by cosine distance that satisfy the filter, best first.

    Returns:
        ``(hits, strategy)``: strategy is ``knn``, ``knn+filter`` or ``exact+filter``.
    """
    if not flt:
        return item_sql.vector_search(conn, query, scope=scope, kinds=kinds, k=k), "knn"
    fetch = min(_KNN_MAX, max(k * overfetch, 100))
    raw = item_sql.vector_search(conn, query, scope=scope, kinds=kinds, k=fetch)
    keep = filter_item_ids(conn, [h.item_id for h in raw], flt)
    hits = [h for h in raw if h.item_id in keep]
    if len(hits) >= k or len(raw) < fetch:
        return hits[:k], "knn+filter"
    # Too selective for the over-fetch: score every matching item exactly.
    ids = _matching_ids(conn, scope, kinds, flt, EXACT_VECTOR_LIMIT)
    if len(ids) > EXACT_VECTOR_LIMIT:
        return hits[:k], "knn+filter"
    return _exact(conn, query, ids, k), "exact+filter"


def structured_rows(
    conn: Any,
    *,
    scope: str,
    table: str,
    flt: FilterSql,
    order_column: str | None,
    descending: bool,
    limit: int,
    offset: int,
) -> tuple[list[int], int]:
    """Ids for a filter-only RQL query: item ids (``chunk``) or resource ids (``doc``).

    ``order_column`` is a column name from the fixed field map, never query text.

    Returns:
        ``(ids, total)``: the page, and how many rows match in all.
    """
    register_functions(conn)
    where, params = flt if flt else ("1", [])
    base = (
        "FROM item JOIN resource ON resource.resource_id = item.resource_id "
        "WHERE item.scope = ? AND item.kind = 'chunk' AND item.deleted = 0 "
        f"AND resource.deleted = 0 AND ({where})"
    )
    direction = "DESC" if descending else "ASC"
    if table == "chunk":
        order = f"ORDER BY {order_column} {direction}" if order_column else ""
        total = conn.execute(f"SELECT count(*) {base}", [scope, *params]).fetchone()[0]
        rows = conn.execute(
            f"SELECT item.item_id {base} {order} LIMIT ? OFFSET ?",
            [scope, *params, limit, offset],
        ).fetchall()
        return [int(r[0]) for r in rows], int(total)
    # doc: a document matches when any of its chunks (or the document itself) does.
    doc_where = (
        "resource.scope = ? AND resource.kind = 'document' AND resource.deleted = 0 AND "
        f"(({where}) AND (item.item_id IS NULL OR item.deleted = 0))"
    )
    source = (
        "FROM resource LEFT JOIN item ON item.resource_id = resource.resource_id "
        f"AND item.kind = 'chunk' WHERE {doc_where}"
    )
    order = f"ORDER BY max({order_column}) {direction}" if order_column else ""
    total = conn.execute(
        f"SELECT count(DISTINCT resource.resource_id) {source}", [scope, *params]
    ).fetchone()[0]
    rows = conn.execute(
        f"SELECT resource.resource_id {source} GROUP BY resource.resource_id {order} "
        "LIMIT ? OFFSET ?",
        [scope, *params, limit, offset],
    ).fetchall()
    return [int(r[0]) for r in rows], int(total)
