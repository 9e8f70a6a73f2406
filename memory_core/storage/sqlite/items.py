"""Items with their lexical (FTS5) and vector (sqlite-vec) rows, written and deleted together.

:class:`SqliteItems` implements :class:`~memory_core.storage.ports.ItemRepository` over one
DB-API connection inside a transaction. The item, its ``item_fts`` row, its ``item_vec`` row and
its SimHash band rows are written by the same call and deleted by the same call (vec0 and FTS5
do not cascade), so no index ever points at a missing item.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from memory_core.errors import EmbeddingError, InvalidInputError
from memory_core.filters import Filter
from memory_core.kinds import ItemKind, check_item_kind
from memory_core.models import (
    Item,
    ItemUpdate,
    NewItem,
    content_hash,
    embedding_text,
    utc_now,
)
from memory_core.scope import Scope
from memory_core.storage.ports import ItemOrder, ItemTotals
from memory_core.storage.records import from_signed64, item_assignments, to_signed64
from memory_core.storage.sqlite.filter_sql import compile_filter, order_column, register_functions

__all__ = [
    "ITEM_COLUMNS",
    "VECTOR_GENERATION_KEY",
    "VEC_TABLE",
    "SqliteItems",
    "bump_vector_generation",
    "delete_items",
    "from_signed64",
    "insert_items",
    "iter_item_texts",
    "row_to_item",
    "scope_kind_where",
    "simhash_bands",
    "to_signed64",
    "vector_blob",
    "vector_table_dimension",
]

VEC_TABLE = "item_vec"

ITEM_COLUMNS = (
    "item.item_id, item.uid, item.scope, item.kind, item.text, item.token_count, "
    "item.content_hash, item.resource_id, item.category_id, item.start_offset, item.end_offset, "
    "item.start_line, item.end_line, item.simhash, item.importance, item.pinned, "
    "item.repeat_count, item.tags, item.created_at, item.updated_at, item.valid_from, "
    "item.valid_to, item.superseded_by, item.deleted"
)
_BATCH = 500
_BANDS = 4


def simhash_bands(simhash: int) -> list[tuple[int, int]]:
    """``(band, value)`` of the four 16-bit bands of a 64-bit SimHash (unsigned)."""
    return [(band, (simhash >> (16 * band)) & 0xFFFF) for band in range(_BANDS)]


def row_to_item(row: Sequence[Any], metadata: dict[str, Any]) -> Item:
    return Item(
        item_id=int(row[0]),
        uid=row[1],
        scope=row[2],
        kind=row[3],
        text=row[4],
        token_count=int(row[5]),
        content_hash=row[6],
        resource_id=row[7],
        category_id=row[8],
        start_offset=row[9],
        end_offset=row[10],
        start_line=row[11],
        end_line=row[12],
        simhash=from_signed64(row[13]),
        importance=float(row[14]),
        pinned=bool(row[15]),
        repeat_count=int(row[16]),
        tags=() if row[17] == "[]" else tuple(json.loads(row[17])),
        created_at=row[18],
        updated_at=row[19],
        valid_from=row[20],
        valid_to=row[21],
        superseded_by=row[22],
        deleted=bool(row[23]),
        metadata=metadata,
    )


def _metadata_sql(meta_keys: Sequence[str] | None) -> str:
    if meta_keys is None:
        return "item.metadata"
    # Only the asked keys, extracted in SQL: loading 100k directives stays within seconds
    # when their examples and rationales are left in the database.
    pairs = ", ".join(f"'{k}', json_extract(item.metadata, '$.{k}')" for k in meta_keys)
    return f"json_object({pairs})" if pairs else "'{}'"


def _check_meta_keys(meta_keys: Sequence[str] | None) -> None:
    for key in meta_keys or ():
        if not key.isidentifier():
            raise InvalidInputError(
                f"invalid metadata key {key[:40]!r}", hint="use identifier-like keys"
            )


def vector_table_dimension(conn: Any) -> int | None:
    """The dimension of ``item_vec``, or None when no vector table exists yet."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (VEC_TABLE,)).fetchone()
    if row is None:
        return None
    sql = str(row[0])
    start = sql.index("float[") + len("float[")
    return int(sql[start : sql.index("]", start)])


def vector_blob(vector: np.ndarray, dimension: int) -> bytes:
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.shape[0] != dimension:
        raise EmbeddingError(
            f"embedding has {array.shape[0]} dimensions but the store's vector index has {dimension}",
            hint="use the embedder the store was built with, or run `memoir reembed`",
        )
    return array.tobytes()


VECTOR_GENERATION_KEY = "vectors_generation"


def bump_vector_generation(conn: Any, scope_keys: Iterable[str]) -> None:
    """Mark vectors changed, store-wide and per scope (inside the writing transaction), so
    in-process vector caches see the change (``SqliteVectors.stamp``)."""
    keys = [VECTOR_GENERATION_KEY, *(f"{VECTOR_GENERATION_KEY}:{k}" for k in set(scope_keys))]
    conn.executemany(
        "INSERT INTO meta(key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        [(k,) for k in keys],
    )


def scope_kind_where(
    scope: Scope | None, kinds: Sequence[str], *, table: str = "item"
) -> tuple[str, list[Any]]:
    """``deleted = 0 AND scope = ? AND kind IN (…)`` over ``table`` (the one builder).

    Kinds come from the closed registry (checked here) and are written as literals, so the
    planner can match partial indexes on kind (``item_recent``).
    """
    clauses, params = [f"{table}.deleted = 0"], []
    if scope is not None:
        clauses.append(f"{table}.scope = ?")
        params.append(scope.key)
    if kinds:
        literals = ",".join(f"'{check_item_kind(k)}'" for k in dict.fromkeys(kinds))
        clauses.append(f"{table}.kind IN ({literals})")
    return " AND ".join(clauses), params


def insert_items(
    conn: Any, items: Sequence[NewItem], vectors: np.ndarray | None = None
) -> list[int]:
    """Insert items with their FTS, vector and SimHash band rows; return their ids.

    Idempotent on ``uid``: an item already stored is left as it is and its id returned.

    Raises:
        InvalidInputError: ``vectors`` does not have one row per item.
        EmbeddingError: a vector has the wrong dimension, or there is no vector index.
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
    band_rows: list[tuple[str, int, int, int]] = []
    for index, item in enumerate(items):
        scope_key = _scope_key(item.scope)
        cursor = conn.execute(
            "INSERT INTO item (uid, scope, kind, resource_id, category_id, text, content_hash, "
            "start_offset, end_offset, start_line, end_line, token_count, simhash, importance, "
            "pinned, repeat_count, tags, created_at, updated_at, valid_from, metadata) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(uid) DO NOTHING",
            (
                item.uid,
                scope_key,
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
                item.repeat_count,
                json.dumps(list(item.tags), ensure_ascii=False),
                item.created_at or now,
                now,
                item.valid_from,
                json.dumps(item.metadata, ensure_ascii=False, sort_keys=True),
            ),
        )
        if cursor.rowcount == 0:
            existing = conn.execute("SELECT item_id FROM item WHERE uid = ?", (item.uid,))
            ids.append(int(existing.fetchone()[0]))
            continue
        item_id = int(cursor.lastrowid)
        ids.append(item_id)
        fts_rows.append((item_id, item.text, " ".join(item.tags)))
        if vectors is not None and dimension is not None:
            blob = vector_blob(vectors[index], dimension)
            vec_rows.append((item_id, scope_key, item.kind, blob))
        if item.simhash is not None:
            band_rows.extend((scope_key, b, v, item_id) for b, v in simhash_bands(item.simhash))
    if fts_rows:
        conn.executemany("INSERT INTO item_fts(rowid, text, tags) VALUES (?,?,?)", fts_rows)
    if vec_rows:
        conn.executemany(
            f"INSERT INTO {VEC_TABLE}(item_id, scope, kind, embedding) VALUES (?,?,?,?)", vec_rows
        )
        bump_vector_generation(conn, {r[1] for r in vec_rows})
    if band_rows:
        conn.executemany(
            "INSERT OR IGNORE INTO item_simhash_band (scope, band, value, item_id) "
            "VALUES (?,?,?,?)",
            band_rows,
        )
    return ids


def delete_items(conn: Any, item_ids: Iterable[int]) -> int:
    """Delete items with their FTS, vector, band rows and graph edges; returns how many went."""
    ids = [(int(i),) for i in item_ids]
    if not ids:
        return 0
    conn.executemany("DELETE FROM item_fts WHERE rowid = ?", ids)
    if vector_table_dimension(conn) is not None:
        scopes: set[str] = set()
        for start in range(0, len(ids), _BATCH):
            batch = [i for (i,) in ids[start : start + _BATCH]]
            marks = ",".join("?" * len(batch))
            scopes.update(
                str(r[0])
                for r in conn.execute(
                    f"SELECT DISTINCT scope FROM item WHERE item_id IN ({marks})", batch
                )
            )
        conn.executemany(f"DELETE FROM {VEC_TABLE} WHERE item_id = ?", ids)
        bump_vector_generation(conn, scopes)
    conn.executemany("DELETE FROM item_simhash_band WHERE item_id = ?", ids)
    conn.executemany("DELETE FROM relation WHERE src_kind = 'item' AND src_id = ?", ids)
    conn.executemany("DELETE FROM relation WHERE dst_kind = 'item' AND dst_id = ?", ids)
    # Links from other items (superseded_by) must not dangle.
    conn.executemany("UPDATE item SET superseded_by = NULL WHERE superseded_by = ?", ids)
    before = conn.total_changes
    conn.executemany("DELETE FROM item WHERE item_id = ?", ids)
    return int(conn.total_changes - before)


def iter_item_texts(conn: Any, batch: int = 512) -> Iterator[list[tuple[int, str, str, str]]]:
    """All live items as (item_id, scope, kind, text to embed), in id order and batches
    (re-embedding). The text to embed is :func:`~memory_core.models.embedding_text`'s."""
    last = 0
    while True:
        rows = conn.execute(
            "SELECT item_id, scope, kind, text, metadata FROM item "
            "WHERE item_id > ? AND deleted = 0 ORDER BY item_id LIMIT ?",
            (last, batch),
        ).fetchall()
        if not rows:
            return
        yield [
            (
                int(r[0]),
                str(r[1]),
                str(r[2]),
                embedding_text(str(r[3]), json.loads(r[4]) if r[4] else None),
            )
            for r in rows
        ]
        last = int(rows[-1][0])


_ORDERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # order -> (ORDER BY, keyset comparison, Item attributes of the key)
    "id": ("item.item_id", "item.item_id > ?", ("item_id",)),
    "created": (
        "item.created_at, item.uid",
        "(item.created_at, item.uid) > (?, ?)",
        ("created_at", "uid"),
    ),
    "offset": (
        "item.resource_id, item.start_offset, item.item_id",
        "(ifnull(item.resource_id, 0), ifnull(item.start_offset, 0), item.item_id) > (?, ?, ?)",
        ("resource_id", "start_offset", "item_id"),
    ),
    "recent": (
        "item.updated_at DESC, item.item_id DESC",
        "(item.updated_at, item.item_id) < (?, ?)",
        ("updated_at", "item_id"),
    ),
}


class SqliteItems:
    """:class:`~memory_core.storage.ports.ItemRepository` on one SQLite connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def add(self, items: Sequence[NewItem], vectors: np.ndarray | None = None) -> list[int]:
        return insert_items(self._conn, items, vectors)

    def get(
        self, item_ids: Sequence[int], *, meta_keys: Sequence[str] | None = None
    ) -> dict[int, Item]:
        _check_meta_keys(meta_keys)
        found: dict[int, Item] = {}
        ids = list(dict.fromkeys(int(i) for i in item_ids))
        meta_sql = _metadata_sql(meta_keys)
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            for row in self._conn.execute(
                f"SELECT {ITEM_COLUMNS}, {meta_sql} FROM item WHERE item.item_id IN ({marks})",
                batch,
            ):
                found[int(row[0])] = row_to_item(row, json.loads(row[24]))
        return found

    def by_uid(self, uids: Sequence[str]) -> dict[str, Item]:
        found: dict[str, Item] = {}
        unique = list(dict.fromkeys(uids))
        for start in range(0, len(unique), _BATCH):
            batch = unique[start : start + _BATCH]
            marks = ",".join("?" * len(batch))
            for row in self._conn.execute(
                f"SELECT {ITEM_COLUMNS}, item.metadata FROM item WHERE item.uid IN ({marks})",
                batch,
            ):
                found[str(row[1])] = row_to_item(row, json.loads(row[24]))
        return found

    def update(self, item_id: int, update: ItemUpdate) -> bool:
        changes = update.changes()
        vector = changes.pop("vector", None) if "vector" in changes else _KEEP
        row = self._conn.execute(
            "SELECT scope, kind, text, tags, simhash FROM item WHERE item_id = ?", (item_id,)
        ).fetchone()
        if row is None:
            return False
        scope_key, kind = str(row[0]), str(row[1])
        columns, params = item_assignments(changes, "?")
        self._conn.execute(
            f"UPDATE item SET {', '.join(columns)} WHERE item_id = ?", (*params, item_id)
        )
        if "text" in changes or "tags" in changes:
            text = changes.get("text", row[2])
            tags = changes.get("tags", tuple(json.loads(row[3])))
            self._conn.execute("DELETE FROM item_fts WHERE rowid = ?", (item_id,))
            self._conn.execute(
                "INSERT INTO item_fts(rowid, text, tags) VALUES (?,?,?)",
                (item_id, text, " ".join(tags)),
            )
            if "text" in changes and vector is _KEEP:
                vector = None  # the old vector describes the old text
        if vector is not _KEEP:
            dimension = vector_table_dimension(self._conn)
            if dimension is not None:
                bump_vector_generation(self._conn, [scope_key])
                self._conn.execute(f"DELETE FROM {VEC_TABLE} WHERE item_id = ?", (item_id,))
                if vector is not None:
                    self._conn.execute(
                        f"INSERT INTO {VEC_TABLE}(item_id, scope, kind, embedding) "
                        "VALUES (?,?,?,?)",
                        (item_id, scope_key, kind, vector_blob(vector, dimension)),
                    )
        if "simhash" in changes:
            self._conn.execute("DELETE FROM item_simhash_band WHERE item_id = ?", (item_id,))
            if changes["simhash"] is not None:
                self._conn.executemany(
                    "INSERT OR IGNORE INTO item_simhash_band (scope, band, value, item_id) "
                    "VALUES (?,?,?,?)",
                    [(scope_key, b, v, item_id) for b, v in simhash_bands(changes["simhash"])],
                )
        return True

    def delete(self, item_ids: Sequence[int]) -> int:
        return delete_items(self._conn, item_ids)

    def find(
        self,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        order: ItemOrder = "id",
        after: Item | None = None,
        limit: int = 100,
        meta_keys: Sequence[str] | None = None,
    ) -> list[Item]:
        _check_meta_keys(meta_keys)
        clause, params = scope_kind_where(scope, kinds)
        join = ""
        if where is not None:
            compiled = compile_filter(where)
            if compiled.needs_glob:
                register_functions(self._conn)
            join = "LEFT JOIN resource ON resource.resource_id = item.resource_id "
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
        order_by, keyset, key_fields = _ORDERS[order]
        if after is not None:
            key = [getattr(after, f) for f in key_fields]
            if order == "offset":
                key = [key[0] or 0, key[1] or 0, key[2]]
            clause += f" AND {keyset}"
            params.extend(key)
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS}, {_metadata_sql(meta_keys)} FROM item {join}"
            f"WHERE {clause} ORDER BY {order_by} LIMIT ?",
            (*params, max(0, int(limit))),
        ).fetchall()
        return [row_to_item(r, json.loads(r[24])) for r in rows]

    def select(
        self,
        scope: Scope,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        order_by: str | None = None,
        descending: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[int], int]:
        clause, params = scope_kind_where(scope, kinds)
        if where is not None:
            compiled = compile_filter(where)
            if compiled.needs_glob:
                register_functions(self._conn)
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
        base = (
            "FROM item LEFT JOIN resource ON resource.resource_id = item.resource_id "
            f"WHERE {clause} AND ifnull(resource.deleted, 0) = 0"
        )
        direction = "DESC" if descending else "ASC"
        order = f"{order_column(order_by)} {direction}, " if order_by else ""
        total = int(self._conn.execute(f"SELECT count(*) {base}", params).fetchone()[0])
        rows = self._conn.execute(
            f"SELECT item.item_id {base} ORDER BY {order}item.item_id LIMIT ? OFFSET ?",
            (*params, max(0, int(limit)), max(0, int(offset))),
        ).fetchall()
        return [int(r[0]) for r in rows], total

    def totals(self, scope: Scope | None, *, kinds: Sequence[ItemKind] = ()) -> ItemTotals:
        clause, params = scope_kind_where(scope, kinds)
        count, tokens = self._conn.execute(
            f"SELECT count(*), coalesce(sum(item.token_count), 0) FROM item WHERE {clause}",
            params,
        ).fetchone()
        return ItemTotals(int(count), int(tokens))

    def count(
        self, scope: Scope | None, *, kinds: Sequence[ItemKind] = (), where: Filter | None = None
    ) -> int:
        clause, params = scope_kind_where(scope, kinds)
        join = ""
        if where is not None:
            compiled = compile_filter(where)
            if compiled.needs_glob:
                register_functions(self._conn)
            join = "LEFT JOIN resource ON resource.resource_id = item.resource_id "
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
        sql = f"SELECT count(*) FROM item {join}WHERE {clause}"
        return int(self._conn.execute(sql, params).fetchone()[0])

    def near_simhash(
        self,
        scope: Scope,
        simhash: int,
        *,
        kinds: Sequence[ItemKind] = (),
        max_distance: int = 3,
        limit: int = 20,
    ) -> list[Item]:
        if not 0 <= max_distance <= _BANDS - 1:
            raise InvalidInputError(
                f"max_distance {max_distance} is outside 0..{_BANDS - 1}",
                hint=f"the band index finds near-duplicates within {_BANDS - 1} bits",
            )
        bands = simhash_bands(simhash)
        # One primary-key probe per band, UNIONed: with the bands OR-ed in one WHERE, SQLite's
        # planner may take the scope prefix alone and scan every band row of the scope.
        probe = " UNION ".join(
            "SELECT item_id FROM item_simhash_band WHERE scope = ? AND band = ? AND value = ?"
            for _ in bands
        )
        candidates = [
            int(r[0])
            for r in self._conn.execute(
                probe, tuple(x for band, value in bands for x in (scope.key, band, value))
            )
        ]
        found = [
            item
            for item in self.get(candidates).values()
            if not item.deleted
            and item.simhash is not None
            and (not kinds or item.kind in kinds)
            and (item.simhash ^ simhash).bit_count() <= max_distance
        ]
        found.sort(key=lambda i: (((i.simhash or 0) ^ simhash).bit_count(), i.item_id))
        return found[:limit]


_KEEP: Any = object()


# -- transitional: the function API the features used before the ports (removed with them) --


def _scope_key(scope: Any) -> str:
    return scope if isinstance(scope, str) else str(scope.key)


def vector_search(
    conn: Any, query: np.ndarray, *, scope: str | None, kinds: Sequence[str] = (), k: int = 50
) -> list[Any]:
    """Nearest items as ScoredId with the cosine DISTANCE (the pre-port convention)."""
    from memory_core.models import ScoredId
    from memory_core.storage.sqlite.vectors import SqliteVectors

    wanted = [check_item_kind(kind) for kind in kinds]
    found = SqliteVectors(conn).search(
        query, None if scope is None else Scope.of(scope), kinds=wanted, k=k
    )
    return [ScoredId(h.item_id, 1.0 - h.score) for h in found.hits]
