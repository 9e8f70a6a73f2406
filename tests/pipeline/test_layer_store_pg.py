"""What only the PostgreSQL layer store does: the HNSW path of wide scope ranges (filtered),
BM25 that agrees with the in-memory store, and its refusals (dimension, missing URL)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from memory_core.errors import ConfigError
from memory_core.storage.layer import InMemoryLayerStore, ItemRow, open_layer_store
from memory_core.storage.layer.postgres import ANALYZE_MIN_ROWS, PostgresLayerStore

pytestmark = pytest.mark.postgres
FIELDS = ("org_id", "user_id")
DIM = 16


def _unit(rng: np.random.Generator, count: int) -> np.ndarray:
    matrix = rng.normal(size=(count, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


@pytest.fixture
def pg(layer_pg_url: str) -> Iterator[PostgresLayerStore]:
    store = PostgresLayerStore(layer_pg_url, exact_below=100)
    store.provision(FIELDS, "create")
    yield store
    store.close()


def test_a_wide_range_search_stays_in_its_scopes_and_agrees_with_brute_force(
    pg: PostgresLayerStore,
) -> None:
    """The wide-range query (over ``exact_below``: the statement that can walk the HNSW graph)
    returns only rows of its range, best first, with recall@10 against brute force of at least
    0.9, and a narrow range is scored exactly. At 600 rows PostgreSQL plans the wide query
    without the index (a sort of the range); the index itself is checked by
    ``test_a_wide_range_search_is_planned_on_the_hnsw_index_and_a_narrow_one_is_not``."""
    rng = np.random.default_rng(3)
    vectors = _unit(rng, 600)
    rows = [
        ItemRow(f"i{n:04d}", {"org_id": "acme" if n % 3 else "evil", "user_id": f"u{n % 7}"},
                "r", f"text {n}", [], 0.5, "stable", embedding=vectors[n])
        for n in range(600)
    ]  # fmt: skip
    pg.upsert_items(rows)
    acme = {"org_id": ("acme",), "user_id": None}
    in_acme = [r for r in rows if r.scope["org_id"] == "acme"]  # 400 > exact_below: wide query
    matrix = np.vstack([r.embedding for r in in_acme if r.embedding is not None])
    hits_total = 0
    for query in _unit(rng, 20):
        hits = pg.vector_search(acme, query, 10)
        assert len(hits) == 10
        assert {h[0] for h in hits} <= {r.item_id for r in in_acme}
        truth = {in_acme[i].item_id for i in np.argsort(-(matrix @ query))[:10]}
        hits_total += len(truth & {h[0] for h in hits})
        scores = [h[1] for h in hits]
        assert scores == sorted(scores, reverse=True)
    assert hits_total / 200 >= 0.9  # recall@10 of the graph walk against brute force
    # a narrow range inside it (one user: < exact_below) is scored exactly, as brute force
    one = {"org_id": ("acme",), "user_id": ("u1",)}
    mine = [r for r in in_acme if r.scope["user_id"] == "u1"]
    query = _unit(rng, 1)[0]
    exact = sorted(((float(r.embedding @ query), r.item_id) for r in mine if r.embedding is not None),
                   reverse=True)[:5]  # fmt: skip
    got = pg.vector_search(one, query, 5)
    assert [h[0] for h in got] == [i for _, i in exact]
    assert np.allclose([h[1] for h in got], [s for s, _ in exact], atol=1e-5)


def test_a_wide_range_with_few_active_rows_still_returns_every_one(pg: PostgresLayerStore) -> None:
    rng = np.random.default_rng(5)
    vectors = _unit(rng, 300)
    # 290 superseded rows and 10 active ones: the status filter starves a plain graph walk
    rows = [
        ItemRow(f"i{n:03d}", {"org_id": "acme", "user_id": "u"}, "r", f"t {n}", [], 0.5,
                "stable", status="active" if n < 10 else "superseded", embedding=vectors[n])
        for n in range(300)
    ]  # fmt: skip
    pg.upsert_items(rows)
    pg.exact_below = 5  # the range (10 active rows) counts as wide: the graph is walked first
    hits = pg.vector_search({"org_id": ("acme",), "user_id": None}, vectors[0], 20)
    assert sorted(h[0] for h in hits) == [f"i{n:03d}" for n in range(10)]


def test_bm25_agrees_with_the_in_memory_store(pg: PostgresLayerStore) -> None:
    memory = InMemoryLayerStore()
    memory.provision(FIELDS, "create")
    texts = [
        "green tea in the afternoon, green tea always",
        "coffee with oat milk in the morning",
        "tea ceremony notes from Kyoto",
        "the payments API ships before March",
        "oat milk and green smoothies",
        "Ünïcode wörds and naïve café",
    ]
    rows = [
        ItemRow(f"i{n}", {"org_id": "acme", "user_id": f"u{n % 2}"}, "r", t, [], 0.5, "stable")
        for n, t in enumerate(texts)
    ]
    rows.append(ItemRow("x", {"org_id": "evil", "user_id": "e"}, "r", "tea " * 50, [], 0.5, "s"))
    pg.upsert_items(rows)
    memory.upsert_items(rows)
    acme = {"org_id": ("acme",), "user_id": None}
    for terms in (["green", "tea"], ["oat", "milk", "morning"], ["café", "wörds"], ["absent"]):
        ours = pg.lexical_search(acme, terms, 10)
        theirs = memory.lexical_search(acme, terms, 10)
        assert [h[0] for h in ours] == [h[0] for h in theirs], terms
        assert np.allclose([h[1] for h in ours], [h[1] for h in theirs], rtol=1e-6), terms


def test_a_vector_of_another_dimension_is_refused_naming_both(pg: PostgresLayerStore) -> None:
    row = ItemRow("a", {"org_id": "o", "user_id": "u"}, "r", "t", [], 0.5, "s",
                  embedding=np.ones(DIM, dtype=np.float32) / 4)  # fmt: skip
    pg.upsert_items([row])
    row.embedding = np.ones(DIM + 1, dtype=np.float32)
    with pytest.raises(ConfigError, match=rf"has {DIM + 1} dimensions.*have {DIM}"):
        pg.upsert_items([row])


def test_postgres_needs_a_url_and_a_set_url_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="needs a url or url_env"):
        open_layer_store({"metadata_store": {"provider": "postgres"}})
    monkeypatch.delenv("LAYER_TEST_URL", raising=False)
    with pytest.raises(ConfigError, match="'LAYER_TEST_URL', which is not set"):
        open_layer_store({"metadata_store": {"provider": "postgres", "url_env": "LAYER_TEST_URL"}})
    with pytest.raises(ConfigError, match="'bruteforce' does not serve the 'postgres' store"):
        open_layer_store(
            {
                "metadata_store": {"provider": "postgres", "url": "postgresql://h/db"},
                "vector_index": {"provider": "bruteforce"},
            }
        )


def test_url_env_is_recorded_by_name(layer_pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYER_TEST_URL", layer_pg_url)
    store, recorded = open_layer_store(
        {"metadata_store": {"provider": "postgres", "url_env": "LAYER_TEST_URL"}}
    )
    store.close()
    assert recorded["metadata_store"]["url_env"] == "LAYER_TEST_URL"
    assert recorded["vector_index"] == {"provider": "pgvector", "inferred": True}


def _hnsw_scans(admin_url: str, schema_url: str) -> int:
    """How many scans PostgreSQL's statistics count on the schema's HNSW index."""
    import psycopg

    schema = schema_url.rsplit("search_path%3D", 1)[1].split(",", 1)[0]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT idx_scan FROM pg_stat_user_indexes "
            "WHERE schemaname = %s AND indexrelname = 'layer_item_hnsw'",
            [schema],
        ).fetchone()
    assert row is not None, f"no HNSW index in schema {schema}"
    return int(row[0])


def _scans_after_close(admin_url: str, url: str, before: int, *, expect_more: bool) -> int:
    """The index's scan count once the store's closed connections have reported their
    statistics (a backend reports them at exit; bounded wait)."""
    deadline = time.monotonic() + 15.0
    while True:
        scans = _hnsw_scans(admin_url, url)
        if scans > before or not expect_more or time.monotonic() > deadline:
            return scans
        time.sleep(0.1)


@pytest.mark.slow
def test_a_wide_range_search_is_planned_on_the_hnsw_index_and_a_narrow_one_is_not(
    layer_pg_url: str, pg_admin_url: str
) -> None:
    """PostgreSQL's own counters of index scans, read around the store's real queries: after
    the bulk write (which the store analyses itself: autovacuum is off for the table here), the
    planner walks the HNSW index for a wide range, and a narrow range (under ``exact_below``)
    is scored exactly without it. The planner chooses by cost: at 2,000 rows (1,333 in the
    range), or at 20,000 before ANALYZE, it scores the range through the scope B-tree and a
    sort instead (measured; see the acceptance doc), so the table is large."""
    import psycopg

    rng = np.random.default_rng(11)
    count = 20_000
    vectors = _unit(rng, count)
    writer = PostgresLayerStore(layer_pg_url, exact_below=100)
    writer.provision(FIELDS, "create")
    _no_autovacuum(layer_pg_url)
    writer.upsert_items([
        ItemRow(f"i{n:05d}", {"org_id": "acme" if n % 3 else "evil", "user_id": f"u{n % 400}"},
                "r", f"text {n}", [], 0.5, "stable", embedding=vectors[n])
        for n in range(count)
    ])  # fmt: skip
    writer.close()
    with psycopg.connect(layer_pg_url, autocommit=True) as conn:
        analysed = conn.execute(
            "SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'layer_item'::regclass"
        ).fetchone()
    assert analysed is not None and analysed[0] == 1, "the store analyses after a bulk write"
    time.sleep(1.0)  # the writer's backends report their own statistics as they exit
    start = _hnsw_scans(pg_admin_url, layer_pg_url)

    narrow = PostgresLayerStore(layer_pg_url, exact_below=100)
    narrow.provision(FIELDS, "create")
    one_user = {"org_id": ("acme",), "user_id": ("u1",)}  # 34 rows < exact_below
    assert len(narrow.vector_search(one_user, vectors[1], 5)) == 5
    narrow.close()
    time.sleep(1.5)
    after_narrow = _scans_after_close(pg_admin_url, layer_pg_url, start, expect_more=False)

    wide = PostgresLayerStore(layer_pg_url, exact_below=100)
    wide.provision(FIELDS, "create")
    acme = {"org_id": ("acme",), "user_id": None}  # 13,333 rows
    assert len(wide.vector_search(acme, vectors[2], 5)) == 5
    wide.close()
    after_wide = _scans_after_close(pg_admin_url, layer_pg_url, after_narrow, expect_more=True)

    assert after_narrow == start, "a narrow range must not walk the HNSW index"
    assert after_wide > after_narrow, "a wide range must be planned on the HNSW index"


def _no_autovacuum(url: str) -> None:
    """Autovacuum off for the schema's ``layer_item``: only the store may analyse it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE layer_item SET (autovacuum_enabled = false)")


def _planner_rows(url: str) -> tuple[float, int]:
    """``layer_item``'s row estimate (``reltuples``, set by ANALYZE) and its ANALYZE count."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT c.reltuples, s.analyze_count FROM pg_class c JOIN pg_stat_user_tables s "
            "ON s.relid = c.oid WHERE c.oid = 'layer_item'::regclass"
        ).fetchone()
    assert row is not None
    return float(row[0]), int(row[1])


def test_a_write_that_grows_the_table_substantially_analyses_it_and_a_small_one_does_not(
    pg: PostgresLayerStore, layer_pg_url: str
) -> None:
    _no_autovacuum(layer_pg_url)

    def rows(start: int, count: int) -> list[ItemRow]:
        return [ItemRow(f"g{n:05d}", {"org_id": "acme", "user_id": f"u{n % 9}"}, "r",
                        f"text {n}", [], 0.5, "stable") for n in range(start, start + count)]  # fmt: skip

    assert _planner_rows(layer_pg_url)[1] == 0
    bulk = ANALYZE_MIN_ROWS + 500
    pg.upsert_items(rows(0, bulk))
    assert _planner_rows(layer_pg_url) == (bulk, 1)  # analysed: the planner sees every row
    pg.upsert_items(rows(bulk, 200))  # small against the table: left to autovacuum
    pg.upsert_items(rows(0, bulk))  # the same items again: the table did not grow
    assert _planner_rows(layer_pg_url) == (bulk, 1)
    # inside one transaction: analysed once it commits
    pg.atomically(lambda: pg.upsert_items(rows(bulk + 200, ANALYZE_MIN_ROWS)))
    assert _planner_rows(layer_pg_url) == (bulk + 200 + ANALYZE_MIN_ROWS, 2)
