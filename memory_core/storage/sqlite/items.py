"""Items with their lexical (FTS5) and vector (sqlite-vec) rows, written and deleted together.

Plain functions over a DB-API connection; callers run them through ``SqliteDatabase.write`` (one
transaction) or ``SqliteDatabase.read``. Each arm of a search is its own statement: joining a
vec0 KNN and an FTS5 MATCH in one statement defeats both indexes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_core.errors import EmbeddingError, InvalidInputError
from memory_core.models import Item, NewItem, ScoredId, content_hash, utc_now

__all__ = [
    "VEC_TABLE",
    "count_items",
    "delete_items",
    "get_items",
    "get_items_by_uid",
    "insert_items",
    "iter_item_texts",
    "lexical_search",
    "row_to_item",
    "to_signed64",
    "vector_search",
    "vector_table_dimension",
]

VEC_TABLE = "item_vec"

_ITEM_COLUMNS = (
    "item_id, uid, scope, kind, text, token_count, content_hash, resource_id, category_id, "
    "start_offset, end_offset, start_line, end_line, simhash, importance, pinned, repeat_count, "
    "tags, created_at, updated_at, valid_from, valid_to, superseded_by, deleted, metadata"
)


def to_signed64(value: int | None) -> int | None:
    """SQLite integers are signed 64-bit; a 64-bit SimHash is stored in two's complement."""
    if value is None:
        return None
    return value - (1 << 64) if value >= (1 << 63) else value


def _from_signed64(value: int | None) -> int | None:
    if value is None:
        return None
    return value + (1 << 64) if value < 0 else value


def row_to_item(row: Sequence[Any]) -> Item:
    return Item(
        item_id=row[0],
        uid=row[1],
        scope=row[2],
        kind=row[3],
        text=row[4],
        token_count=row[5],
        content_hash=row[6],
        resource_id=row[7],
        category_id=row[8],
        start_offset=row[9],
        end_offset=row[10],
        start_line=row[11],
        end_line=row[12],
        simhash=_from_signed64(row[13]),
        importance=row[14],
        pinned=bool(row[15]),
        repeat_count=row[16],
        tags=tuple(json.loads(row[17])),
        created_at=row[18],
        updated_at=row[19],
        valid_from=row[20],
        valid_to=row[21],
        superseded_by=row[22],
        deleted=bool(row[23]),
        metadata=json.loads(row[24]),
    )


def vector_table_dimension(conn: Any) -> int | None:
    """The dimension of ``item_vec``, or None when no vector table exists yet."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (VEC_TABLE,)).fetchone()
    if row is None:
        return None
    sql = str(row[0])
    start = sql.index("float[") + len("float[")
    return int(sql[start : sql.index("]", start)])


def _vector_blob(vector: np.ndarray, dimension: int) -> bytes:
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.shape[0] != dimension:
        raise EmbeddingError(
            f"embedding has {array.shape[0]} dimensions but the store's vector index has {dimension}",
            hint="use the embedder the store was built with, or run `memoir reembed`",
        )
    return array.tobytes()


def insert_items(
    conn: Any, items: Sequence[NewItem], vectors: np.ndarray | None = None
) -> list[int]:
    """Insert items with their FTS rows and (if given) vector rows; return their item ids.

    Idempotent on ``uid``: an item whose uid is already stored is left as it is and its
    existing id is returned, so re-ingesting the same input changes nothing.

    Raises:
        InvalidInputError: ``vectors`` does not have one row per item.
        EmbeddingError: a vector has the wrong dimension.
    """
    if vectors is not None and len(vectors) != len(items):
        raise InvalidInputError(
            f"got {len(vectors)} vectors for {len(items)} items", hint="pass one vector per item"
        )
    dimension = vector_table_dimension(conn) if vectors is not None else None
    if vectors is not None and dimension is None:
        raise EmbeddingError(
            "the store has no vector index yet", hint="open the store through Memoir.open()"
        )
    now = utc_now()
    ids: list[int] = []
    fts_rows: list[tuple[int, str, str]] = []
    vec_rows: list[tuple[int, str, str, bytes]] = []
    for index, item in enumerate(items):
        tags = json.dumps(list(item.tags), ensure_ascii=False)
        cursor = conn.execute(
            "INSERT INTO item (uid, scope, kind, resource_id, category_id, text, content_hash, "
            "start_offset, end_offset, start_line, end_line, token_count, simhash, importance, "
            "pinned, tags, created_at, updated_at, metadata) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(uid) DO NOTHING",
            (
                item.uid,
                item.scope,
                item.kind,
                item.resource_id,
                item.category_id,
                item.text,
                item.content_hash or content_hash(item.text),
                item.start_offset,
                item.end_offset,
                item.start_line,
                item.end_line,
                item.token_count,
                to_signed64(item.simhash),
                item.importance,
                int(item.pinned),
                tags,
                item.created_at or now,
                now,
                json.dumps(item.metadata, ensure_ascii=False, sort_keys=True),
            ),
        )
        if cursor.rowcount == 0:
            existing = conn.execute("SELECT item_id FROM item WHERE uid = ?", (item.uid,))
            ids.append(existing.fetchone()[0])
            continue
        item_id = cursor.lastrowid
        ids.append(item_id)
        fts_rows.append((item_id, item.text, " ".join(item.tags)))
        if vectors is not None and dimension is not None:
            vec_rows.append(
                (item_id, item.scope, item.kind, _vector_blob(vectors[index], dimension))
            )
    if fts_rows:
        conn.executemany("INSERT INTO item_fts(rowid, text, tags) VALUES (?,?,?)", fts_rows)
    if vec_rows:
        conn.executemany(
            f"INSERT INTO {VEC_TABLE}(item_id, scope, kind, embedding) VALUES (?,?,?,?)", vec_rows
        )
    return ids


def delete_items(conn: Any, item_ids: Iterable[int]) -> int:
    """Delete items with their FTS and vector rows; returns how many items went."""
    ids = [(int(i),) for i in item_ids]
    if not ids:
        return 0
    has_vec = vector_table_dimension(conn) is not None
    conn.executemany("DELETE FROM item_fts WHERE rowid = ?", ids)
    if has_vec:
        conn.executemany(f"DELETE FROM {VEC_TABLE} WHERE item_id = ?", ids)
    # Links from other items (superseded_by) must not dangle.
    conn.executemany("UPDATE item SET superseded_by = NULL WHERE superseded_by = ?", ids)
    before = conn.total_changes
    conn.executemany("DELETE FROM item WHERE item_id = ?", ids)
    return int(conn.total_changes - before)


def get_items(conn: Any, item_ids: Sequence[int]) -> dict[int, Item]:
    """Items by id (missing ids are simply absent from the result)."""
    found: dict[int, Item] = {}
    ids = list(dict.fromkeys(int(i) for i in item_ids))
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        for row in conn.execute(
            f"SELECT {_ITEM_COLUMNS} FROM item WHERE item_id IN ({marks})", batch
        ):
            found[row[0]] = row_to_item(row)
    return found


def get_items_by_uid(conn: Any, uids: Sequence[str]) -> dict[str, Item]:
    found: dict[str, Item] = {}
    for start in range(0, len(uids), 500):
        batch = list(uids[start : start + 500])
        marks = ",".join("?" * len(batch))
        for row in conn.execute(f"SELECT {_ITEM_COLUMNS} FROM item WHERE uid IN ({marks})", batch):
            found[row[1]] = row_to_item(row)
    return found


def count_items(conn: Any, *, scope: str | None = None, kind: str | None = None) -> int:
    where, params = ["deleted = 0"], []
    if scope is not None:
        where.append("scope = ?")
        params.append(scope)
    if kind is not None:
        where.append("kind = ?")
        params.append(kind)
    sql = f"SELECT count(*) FROM item WHERE {' AND '.join(where)}"
    return int(conn.execute(sql, params).fetchone()[0])


def iter_item_texts(conn: Any, batch: int = 512) -> Iterable[list[tuple[int, str, str, str]]]:
    """All live items as (item_id, scope, kind, text), in id order and batches (for re-embedding)."""
    last = 0
    while True:
        rows = conn.execute(
            "SELECT item_id, scope, kind, text FROM item WHERE item_id > ? AND deleted = 0 "
            "ORDER BY item_id LIMIT ?",
            (last, batch),
        ).fetchall()
        if not rows:
            return
        yield [tuple(r) for r in rows]
        last = rows[-1][0]


def _scope_kind_filter(scope: str | None, kinds: Sequence[str] | None) -> tuple[str, list[Any]]:
    where, params = ["item.deleted = 0"], []
    if scope is not None:
        where.append("item.scope = ?")
        params.append(scope)
    if kinds:
        where.append(f"item.kind IN ({','.join('?' * len(kinds))})")
        params.extend(kinds)
    return " AND ".join(where), params


def lexical_search(
    conn: Any,
    match: str,
    *,
    scope: str | None,
    kinds: Sequence[str] | None = None,
    limit: int = 50,
    extra_where: str = "",
    extra_params: Sequence[Any] = (),
) -> list[ScoredId]:
    """FTS5 bm25 hits for an already-safe MATCH expression, best first.

    ``bm25`` is negative (more negative is better); it is returned as is so callers keep the raw
    score for explain output and thresholds. ``extra_where`` is a parameterised SQL fragment over
    ``item`` (and ``resource`` when joined by the caller) built by the filter compiler, never text
    from a user.
    """
    where, params = _scope_kind_filter(scope, kinds)
    if extra_where:
        where += f" AND ({extra_where})"
        params.extend(extra_params)
    # CROSS JOIN pins the join order: FTS5 drives and each match probes item by primary key.
    # With a plain JOIN the planner may scan item (by its scope index) and probe the FTS index
    # row by row, which took seconds at 10k items.
    rows = conn.execute(
        "SELECT item.item_id, bm25(item_fts) AS rank FROM item_fts "
        "CROSS JOIN item ON item.item_id = item_fts.rowid "
        "LEFT JOIN resource ON resource.resource_id = item.resource_id "
        f"WHERE item_fts MATCH ? AND {where} ORDER BY rank, item.item_id LIMIT ?",
        (match, *params, limit),
    ).fetchall()
    return [ScoredId(int(r[0]), float(r[1])) for r in rows]


def vector_search(
    conn: Any,
    query: np.ndarray,
    *,
    scope: str | None,
    kinds: Sequence[str] | None = None,
    k: int = 50,
) -> list[ScoredId]:
    """Nearest items by cosine distance (0 = identical), best first.

    Scope is the vec0 partition key and kind a metadata column, so both filter inside the KNN
    instead of after it (no starvation when one kind is rare).
    """
    dimension = vector_table_dimension(conn)
    if dimension is None:
        return []
    blob = _vector_blob(query, dimension)
    # sqlite-vec caps k at 4096 per query.
    where, params = ["embedding MATCH ?", "k = ?"], [blob, max(1, min(int(k), 4096))]
    if scope is not None:
        where.append("scope = ?")
        params.append(scope)
    if kinds:
        where.append(f"kind IN ({','.join('?' * len(kinds))})")
        params.extend(kinds)
    rows = conn.execute(
        f"SELECT item_id, distance FROM {VEC_TABLE} WHERE {' AND '.join(where)} ORDER BY distance",
        params,
    ).fetchall()
    # vec0 allows only ORDER BY distance; ties are broken by id here so results are stable.
    rows.sort(key=lambda r: (r[1], r[0]))
    return [ScoredId(int(r[0]), float(r[1])) for r in rows]
