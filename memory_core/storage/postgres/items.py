"""Items with their lexical (tsvector + BM25 statistics) and vector (pgvector) rows.

:class:`PgItems` implements :class:`~memory_core.storage.ports.ItemRepository` on one psycopg
connection inside a transaction, statement for statement the SQLite repository: the item, its
``item_lexical`` row (and the term statistics BM25 ranks with), its ``item_vec`` row and its
SimHash band rows are written by one call and deleted by one call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg

from memory_core.errors import EmbeddingError, InvalidInputError
from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import Item, ItemUpdate, NewItem, content_hash, utc_now
from memory_core.scope import Scope
from memory_core.storage.ports import ItemOrder, ItemTotals
from memory_core.storage.postgres.database import PgVector
from memory_core.storage.postgres.filter_sql import compile_filter, order_column, scope_kind_where
from memory_core.storage.sqlite.items import row_to_item, simhash_bands, to_signed64

__all__ = [
    "ITEM_COLUMNS",
    "TS_CONFIG",
    "VECTOR_GENERATION_KEY",
    "PgItems",
    "bump_vector_generation",
    "delete_items",
    "lexical_add",
    "lexical_remove",
    "vector_dimension",
    "vector_value",
]

Conn = psycopg.Connection[Any]

TS_CONFIG = "memoir_english"
VECTOR_GENERATION_KEY = "vectors_generation"
ITEM_COLUMNS = (
    "item.item_id, item.uid, item.scope, item.kind, item.text, item.token_count, "
    "item.content_hash, item.resource_id, item.category_id, item.start_offset, item.end_offset, "
    "item.start_line, item.end_line, item.simhash, item.importance, item.pinned, "
    "item.repeat_count, item.tags, item.created_at, item.updated_at, item.valid_from, "
    "item.valid_to, item.superseded_by, item.deleted"
)
_BANDS = 4
# The lexical document of an item: its text and its tags, as FTS5's two columns.
_DOCUMENT = (
    "item.text || ' ' || coalesce((SELECT string_agg(t, ' ') "
    "FROM jsonb_array_elements_text(item.tags::jsonb) AS tags(t)), '')"
)


def _check_meta_keys(meta_keys: Sequence[str] | None) -> None:
    for key in meta_keys or ():
        if not key.isidentifier():
            raise InvalidInputError(
                f"invalid metadata key {key[:40]!r}", hint="use identifier-like keys"
            )


def _metadata_sql(meta_keys: Sequence[str] | None) -> str:
    if meta_keys is None:
        return "item.metadata"
    pairs = ", ".join(f"'{k}', item.metadata::jsonb -> '{k}'" for k in meta_keys)
    # Only the asked keys, extracted in SQL (a missing key reads as null, as json_object does).
    return f"jsonb_build_object({pairs})::text" if pairs else "'{}'"


def _row(row: Sequence[Any]) -> Item:
    return row_to_item(row, json.loads(row[24]))


def vector_dimension(conn: Conn) -> int | None:
    """The dimension of ``item_vec``, or None when no vector table exists yet."""
    row = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('item_vec') "
        "AND attname = 'embedding'"
    ).fetchone()
    return None if row is None else int(row[0])


def vector_value(vector: np.ndarray, dimension: int) -> PgVector:
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.shape[0] != dimension:
        raise EmbeddingError(
            f"embedding has {array.shape[0]} dimensions but the store's vector index has {dimension}",
            hint="use the embedder the store was built with, or run `memoir reembed`",
        )
    return PgVector(array)


def bump_vector_generation(conn: Conn, scope_keys: Iterable[str]) -> None:
    """Mark vectors changed, store-wide and per scope (caches key on it)."""
    keys = sorted({VECTOR_GENERATION_KEY, *(f"{VECTOR_GENERATION_KEY}:{k}" for k in scope_keys)})
    conn.execute(
        "INSERT INTO meta (key, value) SELECT k, '1' FROM unnest(%s::text[]) AS k ORDER BY k "
        "ON CONFLICT (key) DO UPDATE SET value = (meta.value::bigint + 1)::text",
        (keys,),
    )


def lexical_add(conn: Conn, item_ids: Sequence[int]) -> None:
    """Write the lexical rows of ``item_ids`` from their item rows, with the BM25 statistics."""
    if not item_ids:
        return
    ids = list(item_ids)
    conn.execute(
        "INSERT INTO item_lexical (item_id, tsv, length) "
        "SELECT item_id, doc.tsv, (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0) "
        "FROM unnest(doc.tsv) AS u) "
        f"FROM item, LATERAL (SELECT to_tsvector('{TS_CONFIG}', {_DOCUMENT}) AS tsv) AS doc "
        "WHERE item.item_id = ANY(%s)",
        (ids,),
    )
    _term_stats(conn, ids, +1)


def lexical_remove(conn: Conn, item_ids: Sequence[int]) -> None:
    """Delete the lexical rows of ``item_ids`` and take them out of the BM25 statistics."""
    if not item_ids:
        return
    ids = list(item_ids)
    _term_stats(conn, ids, -1)
    conn.execute("DELETE FROM item_lexical WHERE item_id = ANY(%s)", (ids,))


def _term_stats(conn: Conn, ids: list[int], sign: int) -> None:
    # Terms are locked in one order by every writer, so two writers never deadlock on them.
    conn.execute(
        "INSERT INTO lexical_term (term, rows) "
        "SELECT u.lexeme, %s * count(*) FROM item_lexical AS l, unnest(l.tsv) AS u "
        "WHERE l.item_id = ANY(%s) GROUP BY u.lexeme ORDER BY u.lexeme "
        "ON CONFLICT (term) DO UPDATE SET rows = lexical_term.rows + excluded.rows",
        (sign, ids),
    )
    conn.execute(
        "UPDATE lexical_stats SET rows = lexical_stats.rows + %s * d.n, "
        "tokens = lexical_stats.tokens + %s * d.tokens "
        "FROM (SELECT count(*) AS n, coalesce(sum(length), 0) AS tokens FROM item_lexical "
        "WHERE item_id = ANY(%s)) AS d WHERE lexical_stats.id = 1",
        (sign, sign, ids),
    )


def insert_items(conn: Conn, items: Sequence[NewItem], vectors: np.ndarray | None) -> list[int]:
    """Insert items with their lexical, vector and SimHash band rows; return their ids.

    Raises:
        InvalidInputError: ``vectors`` does not have one row per item.
        EmbeddingError: a vector has the wrong dimension, or there is no vector index.
    """
    if vectors is not None and len(vectors) != len(items):
        raise InvalidInputError(
            f"got {len(vectors)} vectors for {len(items)} items", hint="pass one vector per item"
        )
    dimension = vector_dimension(conn) if vectors is not None else None
    if vectors is not None and dimension is None:
        raise EmbeddingError(
            "the store has no vector index yet", hint="open the store through Memoir.open()"
        )
    if vectors is not None and dimension is not None:
        values = [vector_value(v, dimension) for v in vectors]  # checked before any write
    if not items:
        return []
    now = utc_now()
    rows = [
        (
            item.uid,
            item.scope.key,
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
        )
        for item in items
    ]
    new: dict[int, int] = {}  # index in items -> new item id
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO item (uid, scope, kind, resource_id, category_id, text, content_hash, "
            "start_offset, end_offset, start_line, end_line, token_count, simhash, importance, "
            "pinned, repeat_count, tags, created_at, updated_at, valid_from, metadata) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
            "ON CONFLICT (uid) DO NOTHING RETURNING item_id",
            rows,
            returning=True,
        )
        index = 0
        while True:
            row = cur.fetchone()
            if row is not None:
                new[index] = int(row[0])
            index += 1
            if not cur.nextset():
                break
    ids: list[int] = []
    missing = [items[i].uid for i in range(len(items)) if i not in new]
    existing: dict[str, int] = {}
    if missing:
        existing = {
            str(r[0]): int(r[1])
            for r in conn.execute(
                "SELECT uid, item_id FROM item WHERE uid = ANY(%s)", (list(set(missing)),)
            )
        }
    for i, item in enumerate(items):
        ids.append(new[i] if i in new else existing[item.uid])
    fresh = [new[i] for i in sorted(new)]
    lexical_add(conn, fresh)
    if vectors is not None and dimension is not None and new:
        conn.cursor().executemany(
            "INSERT INTO item_vec (item_id, scope, kind, embedding) VALUES (%s, %s, %s, %s)",
            [(new[i], items[i].scope.key, items[i].kind, values[i]) for i in sorted(new)],
        )
        bump_vector_generation(conn, {items[i].scope.key for i in new})
    bands = [
        (items[i].scope.key, b, v, new[i])
        for i in sorted(new)
        if items[i].simhash is not None
        for b, v in simhash_bands(items[i].simhash or 0)
    ]
    if bands:
        conn.cursor().executemany(
            "INSERT INTO item_simhash_band (scope, band, value, item_id) VALUES (%s,%s,%s,%s) "
            "ON CONFLICT DO NOTHING",
            bands,
        )
    return ids


def delete_items(conn: Conn, item_ids: Iterable[int]) -> int:
    """Delete items with their lexical, vector, band rows and graph edges; how many went."""
    ids = sorted({int(i) for i in item_ids})
    if not ids:
        return 0
    lexical_remove(conn, ids)
    if vector_dimension(conn) is not None:
        scopes = [
            str(r[0])
            for r in conn.execute(
                "SELECT DISTINCT scope FROM item_vec WHERE item_id = ANY(%s)", (ids,)
            )
        ]
        conn.execute("DELETE FROM item_vec WHERE item_id = ANY(%s)", (ids,))
        if scopes:
            bump_vector_generation(conn, scopes)
    conn.execute("DELETE FROM item_simhash_band WHERE item_id = ANY(%s)", (ids,))
    conn.execute("DELETE FROM relation WHERE src_kind = 'item' AND src_id = ANY(%s)", (ids,))
    conn.execute("DELETE FROM relation WHERE dst_kind = 'item' AND dst_id = ANY(%s)", (ids,))
    conn.execute("UPDATE item SET superseded_by = NULL WHERE superseded_by = ANY(%s)", (ids,))
    return conn.execute("DELETE FROM item WHERE item_id = ANY(%s)", (ids,)).rowcount


_ORDERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # order -> (ORDER BY, keyset comparison, Item attributes of the key)
    "id": ("item.item_id", "item.item_id > %s", ("item_id",)),
    "created": (
        "item.created_at, item.uid",
        "(item.created_at, item.uid) > (%s, %s)",
        ("created_at", "uid"),
    ),
    "offset": (
        "coalesce(item.resource_id, 0), coalesce(item.start_offset, 0), item.item_id",
        "(coalesce(item.resource_id, 0), coalesce(item.start_offset, 0), item.item_id) "
        "> (%s, %s, %s)",
        ("resource_id", "start_offset", "item_id"),
    ),
    "recent": (
        "item.updated_at DESC, item.item_id DESC",
        "(item.updated_at, item.item_id) < (%s, %s)",
        ("updated_at", "item_id"),
    ),
}

_KEEP: Any = object()


class PgItems:
    """:class:`~memory_core.storage.ports.ItemRepository` on one PostgreSQL connection."""

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    def add(self, items: Sequence[NewItem], vectors: np.ndarray | None = None) -> list[int]:
        return insert_items(self._conn, items, vectors)

    def get(
        self, item_ids: Sequence[int], *, meta_keys: Sequence[str] | None = None
    ) -> dict[int, Item]:
        _check_meta_keys(meta_keys)
        ids = list(dict.fromkeys(int(i) for i in item_ids))
        if not ids:
            return {}
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS}, {_metadata_sql(meta_keys)} FROM item "
            "WHERE item.item_id = ANY(%s)",
            (ids,),
        )
        return {int(r[0]): _row(r) for r in rows}

    def by_uid(self, uids: Sequence[str]) -> dict[str, Item]:
        unique = list(dict.fromkeys(uids))
        if not unique:
            return {}
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS}, item.metadata FROM item WHERE item.uid = ANY(%s)", (unique,)
        )
        return {str(r[1]): _row(r) for r in rows}

    def update(self, item_id: int, update: ItemUpdate) -> bool:
        changes = update.changes()
        vector = changes.pop("vector", None) if "vector" in changes else _KEEP
        row = self._conn.execute(
            "SELECT scope, kind FROM item WHERE item_id = %s FOR UPDATE", (item_id,)
        ).fetchone()
        if row is None:
            return False
        scope_key, kind = str(row[0]), str(row[1])
        columns: list[str] = []
        params: list[Any] = []
        for name, value in changes.items():
            if name == "tags":
                value = json.dumps(list(value), ensure_ascii=False)
            elif name == "metadata":
                value = json.dumps(value, ensure_ascii=False, sort_keys=True)
            elif name == "pinned":
                value = int(value)
            elif name == "simhash":
                value = to_signed64(value)
            columns.append(f"{name} = %s")
            params.append(value)
        columns.append("updated_at = %s")
        params.append(utc_now())
        relex = "text" in changes or "tags" in changes
        if relex:
            lexical_remove(self._conn, [item_id])
        self._conn.execute(
            f"UPDATE item SET {', '.join(columns)} WHERE item_id = %s", (*params, item_id)
        )
        if relex:
            lexical_add(self._conn, [item_id])
            if "text" in changes and vector is _KEEP:
                vector = None  # the old vector describes the old text
        if vector is not _KEEP:
            dimension = vector_dimension(self._conn)
            if dimension is not None:
                bump_vector_generation(self._conn, [scope_key])
                self._conn.execute("DELETE FROM item_vec WHERE item_id = %s", (item_id,))
                if vector is not None:
                    self._conn.execute(
                        "INSERT INTO item_vec (item_id, scope, kind, embedding) "
                        "VALUES (%s, %s, %s, %s)",
                        (item_id, scope_key, kind, vector_value(vector, dimension)),
                    )
        if "simhash" in changes:
            self._conn.execute("DELETE FROM item_simhash_band WHERE item_id = %s", (item_id,))
            if changes["simhash"] is not None:
                self._conn.cursor().executemany(
                    "INSERT INTO item_simhash_band (scope, band, value, item_id) "
                    "VALUES (%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                    [(scope_key, b, v, item_id) for b, v in simhash_bands(changes["simhash"])],
                )
        return True

    def delete(self, item_ids: Sequence[int]) -> int:
        return delete_items(self._conn, item_ids)

    def _filtered(
        self, scope: Scope | None, kinds: Sequence[str], where: Filter | None
    ) -> tuple[str, str, list[Any]]:
        clause, params = scope_kind_where(scope.key if scope else None, list(kinds))
        join = ""
        if where is not None:
            compiled = compile_filter(where)
            join = "LEFT JOIN resource ON resource.resource_id = item.resource_id "
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
        return join, clause, params

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
        join, clause, params = self._filtered(scope, kinds, where)
        order_by, keyset, key_fields = _ORDERS[order]
        if after is not None:
            key = [getattr(after, f) for f in key_fields]
            if order == "offset":
                key = [key[0] or 0, key[1] or 0, key[2]]
            clause += f" AND {keyset}"
            params.extend(key)
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS}, {_metadata_sql(meta_keys)} FROM item {join}"
            f"WHERE {clause} ORDER BY {order_by} LIMIT %s",
            (*params, max(0, int(limit))),
        ).fetchall()
        return [_row(r) for r in rows]

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
        clause, params = scope_kind_where(scope.key, list(kinds))
        if where is not None:
            compiled = compile_filter(where)
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
        base = (
            "FROM item LEFT JOIN resource ON resource.resource_id = item.resource_id "
            f"WHERE {clause} AND coalesce(resource.deleted, 0) = 0"
        )
        direction = "DESC" if descending else "ASC"
        nulls = "NULLS LAST" if descending else "NULLS FIRST"  # SQLite: NULL is smallest
        order = f"{order_column(order_by)} {direction} {nulls}, " if order_by else ""
        row = self._conn.execute(f"SELECT count(*) {base}", params).fetchone()
        rows = self._conn.execute(
            f"SELECT item.item_id {base} ORDER BY {order}item.item_id LIMIT %s OFFSET %s",
            (*params, max(0, int(limit)), max(0, int(offset))),
        ).fetchall()
        return [int(r[0]) for r in rows], int(row[0]) if row else 0

    def totals(self, scope: Scope | None, *, kinds: Sequence[ItemKind] = ()) -> ItemTotals:
        clause, params = scope_kind_where(scope.key if scope else None, list(kinds))
        row = self._conn.execute(
            f"SELECT count(*), coalesce(sum(item.token_count), 0) FROM item WHERE {clause}",
            params,
        ).fetchone()
        assert row is not None
        return ItemTotals(int(row[0]), int(row[1]))

    def count(
        self, scope: Scope | None, *, kinds: Sequence[ItemKind] = (), where: Filter | None = None
    ) -> int:
        join, clause, params = self._filtered(scope, kinds, where)
        row = self._conn.execute(f"SELECT count(*) FROM item {join}WHERE {clause}", params)
        found = row.fetchone()
        return int(found[0]) if found else 0

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
        probe = " OR ".join("(band = %s AND value = %s)" for _ in bands)
        candidates = [
            int(r[0])
            for r in self._conn.execute(
                f"SELECT DISTINCT item_id FROM item_simhash_band WHERE scope = %s AND ({probe})",
                (scope.key, *(x for pair in bands for x in pair)),
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
