"""Items on PostgreSQL: the shared server repository with a tsvector lexical row (and the BM25
term statistics) and a pgvector vector row.

:class:`PgItems` is :class:`~memory_core.storage.server.items.ServerItems` in the PostgreSQL
dialect; the module functions keep the names the store, the dump and the other repositories
call them by.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg

from memory_core.models import NewItem
from memory_core.storage.postgres.database import PgVector
from memory_core.storage.server.dialect import POSTGRES
from memory_core.storage.server.items import (
    INSERT_COLUMNS,
    INSERT_MARKS,
    ITEM_COLUMNS,
    VECTOR_GENERATION_KEY,
    ServerItems,
    check_dimension,
)

__all__ = [
    "ITEM_COLUMNS",
    "TS_CONFIG",
    "VECTOR_GENERATION_KEY",
    "PgItems",
    "bump_vector_generation",
    "delete_items",
    "insert_items",
    "lexical_add",
    "lexical_remove",
    "vector_dimension",
    "vector_value",
]

Conn = psycopg.Connection[Any]

TS_CONFIG = "memoir_english"
# The lexical document of an item: its text and its tags, as FTS5's two columns.
_DOCUMENT = (
    "item.text || ' ' || coalesce((SELECT string_agg(t, ' ') "
    "FROM jsonb_array_elements_text(item.tags::jsonb) AS tags(t)), '')"
)


def vector_dimension(conn: Conn) -> int | None:
    """The dimension of ``item_vec``, or None when no vector table exists yet."""
    row = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('item_vec') "
        "AND attname = 'embedding'"
    ).fetchone()
    return None if row is None else int(row[0])


def vector_value(vector: np.ndarray, dimension: int) -> PgVector:
    return PgVector(check_dimension(vector, dimension))


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


class PgItems(ServerItems):
    """:class:`~memory_core.storage.ports.ItemRepository` on one PostgreSQL connection."""

    dialect = POSTGRES

    def _insert_rows(self, rows: list[tuple[Any, ...]]) -> dict[int, int]:
        new: dict[int, int] = {}
        with self._conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {INSERT_COLUMNS} VALUES {INSERT_MARKS} "
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
        return new

    def lexical_add(self, item_ids: Sequence[int]) -> None:
        lexical_add(self._conn, item_ids)

    def lexical_remove(self, item_ids: Sequence[int]) -> None:
        lexical_remove(self._conn, item_ids)

    def vector_dimension(self) -> int | None:
        return vector_dimension(self._conn)

    def _vector_param(self, array: np.ndarray) -> Any:
        return PgVector(array)

    def bump_vector_generation(self, scope_keys: Iterable[str]) -> None:
        bump_vector_generation(self._conn, scope_keys)

    def _delete_edges(self, item_ids: list[int]) -> None:
        self._conn.execute(
            "DELETE FROM relation WHERE src_kind = 'item' AND src_id = ANY(%s)", (item_ids,)
        )
        self._conn.execute(
            "DELETE FROM relation WHERE dst_kind = 'item' AND dst_id = ANY(%s)", (item_ids,)
        )

    def _metadata_sql(self, meta_keys: Sequence[str] | None) -> str:
        if meta_keys is None:
            return "item.metadata"
        pairs = ", ".join(f"'{k}', item.metadata::jsonb -> '{k}'" for k in meta_keys)
        # Only the asked keys, extracted in SQL (a missing key reads as null, as json_object).
        return f"jsonb_build_object({pairs})::text" if pairs else "'{}'"


def insert_items(conn: Conn, items: Sequence[NewItem], vectors: np.ndarray | None) -> list[int]:
    """Insert items with their lexical, vector and SimHash band rows; return their ids."""
    return PgItems(conn).add(items, vectors)


def delete_items(conn: Conn, item_ids: Iterable[int]) -> int:
    """Delete items with their lexical, vector, band rows and graph edges; how many went."""
    return PgItems(conn).delete(list(item_ids))
