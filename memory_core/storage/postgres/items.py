"""Items on PostgreSQL: the shared server repository with a tsvector lexical row, its postings
(and the BM25 term statistics) and a pgvector vector row.

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
    ServerItems,
    check_dimension,
)

__all__ = [
    "ITEM_COLUMNS",
    "SLOTS",
    "TS_CONFIG",
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
# The counter slot of a writing transaction (migration 0002): hot counters are split into 16
# rows and readers sum them, so any slot keeps the counts exact; the choice only decides who
# waits for whom. A transaction takes the first slot, from its connection's own
# (pg_backend_pid() % 16) on, that no other writing transaction holds (a transaction-scoped
# advisory try-lock: never waits, re-entrant for the same transaction, released at commit);
# up to 16 concurrent writers never share a counter row. When all are held it uses its own
# and waits on the row locks as before.
SLOTS = 16
_SLOT_LOCK = 0x6D656D6F  # "memo": the advisory lock class of counter slots
SLOT = (
    f"coalesce((SELECT s FROM generate_series(0, {SLOTS - 1}) AS i, "
    f"LATERAL (SELECT mod(pg_backend_pid() + i, {SLOTS}) AS s) AS c "
    f"WHERE pg_try_advisory_xact_lock({_SLOT_LOCK}, s) LIMIT 1), "
    f"mod(pg_backend_pid(), {SLOTS}))"
)
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
    """Mark the vectors of ``scope_keys`` changed (caches key on the sum of the generations:
    per scope, and of every scope for the store-wide stamp), in this connection's slot."""
    keys = sorted(set(scope_keys))
    if not keys:
        return
    conn.execute(
        f"INSERT INTO vector_generation (scope, slot, generation) SELECT k, {SLOT}, 1 "
        "FROM unnest(%s::text[]) AS k ORDER BY k ON CONFLICT (scope, slot) "
        "DO UPDATE SET generation = vector_generation.generation + 1",
        (keys,),
    )


def lexical_add(conn: Conn, item_ids: Sequence[int]) -> None:
    """Write the lexical rows of ``item_ids`` from their item rows, with their postings and the
    BM25 statistics (and the item's scope, kind and deleted flag, which the search filters on:
    migrations 0003, 0004)."""
    if not item_ids:
        return
    ids = list(item_ids)
    conn.execute(
        "INSERT INTO item_lexical (item_id, tsv, length, scope, kind, deleted) "
        "SELECT item_id, doc.tsv, (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0) "
        "FROM unnest(doc.tsv) AS u), item.scope, item.kind, item.deleted "
        f"FROM item, LATERAL (SELECT to_tsvector('{TS_CONFIG}', {_DOCUMENT}) AS tsv) AS doc "
        "WHERE item.item_id = ANY(%s)",
        (ids,),
    )
    # The postings (migration 0004): what BM25 reads, term by term. In term order, as the
    # term statistics, so two writers of shared terms wait for each other, never deadlock.
    conn.execute(
        "INSERT INTO lexical_posting (term, item_id, tf, length, scope, kind, deleted) "
        "SELECT u.lexeme, l.item_id, coalesce(array_length(u.positions, 1), 1), l.length, "
        "l.scope, l.kind, l.deleted FROM item_lexical AS l, unnest(l.tsv) AS u "
        "WHERE l.item_id = ANY(%s) ORDER BY u.lexeme, l.item_id",
        (ids,),
    )
    _term_stats(conn, ids, +1)


def lexical_remove(conn: Conn, item_ids: Sequence[int]) -> None:
    """Delete the lexical rows of ``item_ids`` and their postings, and take them out of the
    BM25 statistics."""
    if not item_ids:
        return
    ids = list(item_ids)
    _term_stats(conn, ids, -1)
    # The row's lexemes name its postings: each is found by its primary key.
    conn.execute(
        "DELETE FROM lexical_posting AS p USING item_lexical AS l, unnest(l.tsv) AS u "
        "WHERE l.item_id = ANY(%s) AND p.term = u.lexeme AND p.item_id = l.item_id",
        (ids,),
    )
    conn.execute("DELETE FROM item_lexical WHERE item_id = ANY(%s)", (ids,))


def _term_stats(conn: Conn, ids: list[int], sign: int) -> None:
    # In this connection's slot (migration 0002): concurrent writers on other connections
    # update other rows. Terms are locked in one order, so two writers of one slot never
    # deadlock on them.
    conn.execute(
        f"INSERT INTO lexical_term (term, slot, rows) SELECT u.lexeme, {SLOT}, %s * count(*) "
        "FROM item_lexical AS l, unnest(l.tsv) AS u "
        "WHERE l.item_id = ANY(%s) GROUP BY u.lexeme ORDER BY u.lexeme "
        "ON CONFLICT (term, slot) DO UPDATE SET rows = lexical_term.rows + excluded.rows",
        (sign, ids),
    )
    conn.execute(
        f"INSERT INTO lexical_stats (slot, rows, tokens) SELECT {SLOT}, %s * count(*), "
        "%s * coalesce(sum(length), 0) FROM item_lexical WHERE item_id = ANY(%s) "
        "ON CONFLICT (slot) DO UPDATE SET rows = lexical_stats.rows + excluded.rows, "
        "tokens = lexical_stats.tokens + excluded.tokens",
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
