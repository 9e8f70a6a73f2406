"""Items with their lexical, vector and SimHash band rows, on a server backend.

:class:`ServerItems` implements :class:`~memory_core.storage.ports.ItemRepository` once for
PostgreSQL and MySQL/MariaDB, statement for statement the SQLite repository: the item, its
lexical rows, its vector row and its SimHash band rows are written by one call and deleted by
one call. A backend subclass sets the dialect and supplies the rows that differ: how a batch of
items is inserted, the lexical index (:meth:`ServerItems.lexical_add` / ``lexical_remove``) and
the vector column (:meth:`ServerItems.vector_dimension`, ``_vector_param``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memory_core.errors import EmbeddingError, InvalidInputError
from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import Item, ItemUpdate, NewItem, content_hash, utc_now
from memory_core.scope import Scope
from memory_core.storage.ports import ItemOrder, ItemTotals
from memory_core.storage.records import item_assignments, to_signed64
from memory_core.storage.server.dialect import Dialect
from memory_core.storage.server.filter_sql import compile_filter, order_column, scope_kind_where
from memory_core.storage.sqlite.items import row_to_item, simhash_bands

__all__ = [
    "ITEM_COLUMNS",
    "VECTOR_GENERATION_KEY",
    "ServerItems",
    "check_dimension",
    "lexical_lengths",
]

VECTOR_GENERATION_KEY = "vectors_generation"
ITEM_COLUMNS = (
    "item.item_id, item.uid, item.scope, item.kind, item.text, item.token_count, "
    "item.content_hash, item.resource_id, item.category_id, item.start_offset, item.end_offset, "
    "item.start_line, item.end_line, item.simhash, item.importance, item.pinned, "
    "item.repeat_count, item.tags, item.created_at, item.updated_at, item.valid_from, "
    "item.valid_to, item.superseded_by, item.deleted"
)
INSERT_COLUMNS = (
    "item (uid, scope, kind, resource_id, category_id, text, content_hash, start_offset, "
    "end_offset, start_line, end_line, token_count, simhash, importance, pinned, repeat_count, "
    "tags, created_at, updated_at, valid_from, metadata)"
)
INSERT_MARKS = "(" + ",".join(["%s"] * 21) + ")"
_BANDS = 4

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


def lexical_lengths(conn: Any, clause: str, params: Sequence[Any]) -> dict[int, int]:
    """Token length of each item matching ``clause`` (a scope/kind WHERE over ``item``), by id:
    the BM25 lengths of PostgreSQL and MySQL, whose ``item_lexical`` rows both keep them."""
    rows = conn.execute(
        "SELECT item.item_id, l.length FROM item "
        f"JOIN item_lexical AS l ON l.item_id = item.item_id WHERE {clause}",
        params,
    ).fetchall()
    return {int(r[0]): int(r[1]) for r in rows}


def check_meta_keys(meta_keys: Sequence[str] | None) -> None:
    for key in meta_keys or ():
        if not key.isidentifier():
            raise InvalidInputError(
                f"invalid metadata key {key[:40]!r}", hint="use identifier-like keys"
            )


def check_dimension(vector: np.ndarray, dimension: int) -> np.ndarray:
    """``vector`` as float32, or EmbeddingError when its dimension is not the index's."""
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.shape[0] != dimension:
        raise EmbeddingError(
            f"embedding has {array.shape[0]} dimensions but the store's vector index has {dimension}",
            hint="use the embedder the store was built with, or run `memoir reembed`",
        )
    return array


def new_item_row(item: NewItem, now: str) -> tuple[Any, ...]:
    """The values of :data:`INSERT_COLUMNS` for ``item``."""
    return (
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


class ServerItems:
    """:class:`~memory_core.storage.ports.ItemRepository` on one server connection."""

    dialect: Dialect

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    # -- what a backend supplies -------------------------------------------------------------

    def _insert_rows(self, rows: list[tuple[Any, ...]]) -> dict[int, int]:
        """Insert ``rows`` (skipping a uid already stored); index in rows -> new item id."""
        raise NotImplementedError

    def lexical_add(self, item_ids: Sequence[int]) -> None:
        """Write the lexical rows of ``item_ids`` from their item rows."""
        raise NotImplementedError

    def lexical_remove(self, item_ids: Sequence[int]) -> None:
        raise NotImplementedError

    def vector_dimension(self) -> int | None:
        """The dimension of the vector index, None before ``ensure_embedder``."""
        raise NotImplementedError

    def _vector_param(self, array: np.ndarray) -> Any:
        """A float32 vector as the driver's parameter for ``item_vec.embedding``."""
        raise NotImplementedError

    def bump_vector_generation(self, scope_keys: Iterable[str]) -> None:
        """Mark vectors changed, store-wide and per scope (caches key on it)."""
        raise NotImplementedError

    def _delete_edges(self, item_ids: list[int]) -> None:
        """Delete graph rows that point at items about to be deleted (none without a graph)."""

    def _metadata_sql(self, meta_keys: Sequence[str] | None) -> str:
        return "item.metadata"

    # -- shared ------------------------------------------------------------------------------

    def _in(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return self.dialect.in_list(column, values)

    def _row(self, row: Sequence[Any], meta_keys: Sequence[str] | None = None) -> Item:
        metadata = json.loads(row[24])
        if meta_keys is not None and self._metadata_sql(meta_keys) == "item.metadata":
            metadata = {k: metadata.get(k) for k in meta_keys}
        return row_to_item(row, metadata)

    def vector_value(self, vector: np.ndarray, dimension: int) -> Any:
        return self._vector_param(check_dimension(vector, dimension))

    def _insert_vectors(self, rows: list[tuple[int, str, str, Any]]) -> None:
        self.dialect.executemany(
            self._conn,
            "INSERT INTO item_vec (item_id, scope, kind, embedding) VALUES (%s, %s, %s, %s)",
            rows,
        )

    def _insert_bands(self, rows: list[tuple[str, int, int, int]]) -> None:
        head, tail = self.dialect.insert_ignore(
            "item_simhash_band (scope, band, value, item_id)", "item_id"
        )
        self.dialect.executemany(self._conn, f"{head} VALUES (%s,%s,%s,%s){tail}", rows)

    def add(self, items: Sequence[NewItem], vectors: np.ndarray | None = None) -> list[int]:
        if vectors is not None and len(vectors) != len(items):
            raise InvalidInputError(
                f"got {len(vectors)} vectors for {len(items)} items",
                hint="pass one vector per item",
            )
        dimension = self.vector_dimension() if vectors is not None else None
        if vectors is not None and dimension is None:
            raise EmbeddingError(
                "the store has no vector index yet", hint="open the store through Memoir.open()"
            )
        values: list[Any] = []
        if vectors is not None and dimension is not None:
            values = [self.vector_value(v, dimension) for v in vectors]  # checked before writing
        if not items:
            return []
        now = utc_now()
        # Rows go in uid order: two writers of overlapping batches then lock the unique
        # index in one order and wait for each other instead of deadlocking.
        order = sorted(range(len(items)), key=lambda i: items[i].uid)
        inserted = self._insert_rows([new_item_row(items[i], now) for i in order])
        new = {order[k]: item_id for k, item_id in inserted.items()}
        missing = list({items[i].uid for i in range(len(items)) if i not in new})
        existing: dict[str, int] = {}
        if missing:
            where, params = self._in("uid", missing)
            existing = {
                str(r[0]): int(r[1])
                for r in self._conn.execute(f"SELECT uid, item_id FROM item WHERE {where}", params)
            }
        ids = [new[i] if i in new else existing[item.uid] for i, item in enumerate(items)]
        self.lexical_add([new[i] for i in sorted(new)])
        if values and new:
            self._insert_vectors(
                [(new[i], items[i].scope.key, items[i].kind, values[i]) for i in sorted(new)]
            )
            self.bump_vector_generation({items[i].scope.key for i in new})
        self._insert_bands(
            [
                (items[i].scope.key, b, v, new[i])
                for i in sorted(new)
                if items[i].simhash is not None
                for b, v in simhash_bands(items[i].simhash or 0)
            ]
        )
        return ids

    def get(
        self, item_ids: Sequence[int], *, meta_keys: Sequence[str] | None = None
    ) -> dict[int, Item]:
        check_meta_keys(meta_keys)
        ids = list(dict.fromkeys(int(i) for i in item_ids))
        if not ids:
            return {}
        where, params = self._in("item.item_id", ids)
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS}, {self._metadata_sql(meta_keys)} FROM item WHERE {where}",
            params,
        )
        return {int(r[0]): self._row(r, meta_keys) for r in rows}

    def by_uid(self, uids: Sequence[str]) -> dict[str, Item]:
        unique = list(dict.fromkeys(uids))
        if not unique:
            return {}
        where, params = self._in("item.uid", unique)
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS}, item.metadata FROM item WHERE {where}", params
        )
        return {str(r[1]): self._row(r) for r in rows}

    def update(self, item_id: int, update: ItemUpdate) -> bool:
        changes = update.changes()
        vector = changes.pop("vector", None) if "vector" in changes else _KEEP
        row = self._conn.execute(
            "SELECT scope, kind FROM item WHERE item_id = %s FOR UPDATE", (item_id,)
        ).fetchone()
        if row is None:
            return False
        scope_key, kind = str(row[0]), str(row[1])
        columns, params = item_assignments(changes, "%s")
        relex = "text" in changes or "tags" in changes
        if relex:
            self.lexical_remove([item_id])
        self._conn.execute(
            f"UPDATE item SET {', '.join(columns)} WHERE item_id = %s", (*params, item_id)
        )
        if relex:
            self.lexical_add([item_id])
            if "text" in changes and vector is _KEEP:
                vector = None  # the old vector describes the old text
        if vector is not _KEEP:
            dimension = self.vector_dimension()
            if dimension is not None:
                self.bump_vector_generation([scope_key])
                self._conn.execute("DELETE FROM item_vec WHERE item_id = %s", (item_id,))
                if vector is not None:
                    self._insert_vectors(
                        [(item_id, scope_key, kind, self.vector_value(vector, dimension))]
                    )
        if "simhash" in changes:
            self._conn.execute("DELETE FROM item_simhash_band WHERE item_id = %s", (item_id,))
            if changes["simhash"] is not None:
                self._insert_bands(
                    [(scope_key, b, v, item_id) for b, v in simhash_bands(changes["simhash"])]
                )
        return True

    def delete(self, item_ids: Sequence[int]) -> int:
        ids = sorted({int(i) for i in item_ids})
        if not ids:
            return 0
        self.lexical_remove(ids)
        where, params = self._in("item_id", ids)
        if self.vector_dimension() is not None:
            scopes = [
                str(r[0])
                for r in self._conn.execute(
                    f"SELECT DISTINCT scope FROM item_vec WHERE {where}", params
                )
            ]
            self._conn.execute(f"DELETE FROM item_vec WHERE {where}", params)
            if scopes:
                self.bump_vector_generation(scopes)
        self._conn.execute(f"DELETE FROM item_simhash_band WHERE {where}", params)
        self._delete_edges(ids)
        superseded, more = self._in("superseded_by", ids)
        self._conn.execute(f"UPDATE item SET superseded_by = NULL WHERE {superseded}", more)
        return int(self._conn.execute(f"DELETE FROM item WHERE {where}", params).rowcount)

    def _filtered(
        self, scope: Scope | None, kinds: Sequence[str], where: Filter | None
    ) -> tuple[str, str, list[Any]]:
        clause, params = scope_kind_where(scope.key if scope else None, list(kinds))
        join = ""
        if where is not None:
            compiled = compile_filter(where, self.dialect)
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
        check_meta_keys(meta_keys)
        join, clause, params = self._filtered(scope, kinds, where)
        order_by, keyset, key_fields = _ORDERS[order]
        if after is not None:
            key = [getattr(after, f) for f in key_fields]
            if order == "offset":
                key = [key[0] or 0, key[1] or 0, key[2]]
            clause += f" AND {keyset}"
            params.extend(key)
        rows = self._conn.execute(
            f"SELECT {ITEM_COLUMNS}, {self._metadata_sql(meta_keys)} FROM item {join}"
            f"WHERE {clause} ORDER BY {order_by} LIMIT %s",
            (*params, max(0, int(limit))),
        ).fetchall()
        return [self._row(r, meta_keys) for r in rows]

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
            compiled = compile_filter(where, self.dialect)
            clause += f" AND ({compiled.sql})"
            params.extend(compiled.params)
        base = (
            "FROM item LEFT JOIN resource ON resource.resource_id = item.resource_id "
            f"WHERE {clause} AND coalesce(resource.deleted, 0) = 0"
        )
        direction = "DESC" if descending else "ASC"
        order = ""
        if order_by:
            column = order_column(order_by, self.dialect)
            order = f"{column} {direction}{self.dialect.nulls(descending)}, "
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
        found = self._conn.execute(
            f"SELECT count(*) FROM item {join}WHERE {clause}", params
        ).fetchone()
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
