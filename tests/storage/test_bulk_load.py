"""The benchmarks' bulk loader (``bench/bulk_load.py``) writes what the write path writes.

The PostgreSQL and SQLite figures at 100k-1M chunks are measured on stores it builds, so a
bulk-loaded store must hold the rows of one built a document per transaction (items, lexical
rows and term statistics, vectors, the HNSW index) and answer every query the same.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from store_testkit import DIM, unit_vectors

from bench.bulk_load import Batch, build_per_document, bulk_build, store_fingerprint
from memory_core.config import SearchSettings
from memory_core.documents.records import CHUNK_KIND, NewDocument
from memory_core.embed import create_embedder
from memory_core.models import NewItem, stable_id
from memory_core.retrieval.engine import SearchEngine, SearchRequest
from memory_core.scope import Scope
from memory_core.storage.ports import Store

pytestmark = pytest.mark.anyio

WORDS = [
    "retry",
    "backoff",
    "budget",
    "cache",
    "index",
    "vector",
    "lexical",
    "planner",
    "commit",
    "rollback",
]


def corpus(scope: Scope, documents: int = 24, chunks: int = 5) -> list[Batch]:
    rng = np.random.default_rng(3)
    batches: list[Batch] = []
    for d in range(documents):
        doc_id = stable_id("t", d)
        doc = NewDocument(
            doc_id, scope, f"/c/d{d}.md", doc_id, "2026-01-01T00:00:00+00:00", 1, ("t",), "test"
        )
        items = [
            NewItem(
                uid=stable_id(doc_id, c),
                kind=CHUNK_KIND,
                text=" ".join(rng.choice(WORDS, 8)),
                token_count=8,
                scope=scope,
                start_offset=c * 100,
                end_offset=c * 100 + 50,
                tags=doc.tags,
            )
            for c in range(chunks)
        ]
        batches.append((doc, items, unit_vectors(chunks, seed=d)))
    return batches


async def answers(store: Store, queries: list[str]) -> list[list[tuple[str, float]]]:
    engine = SearchEngine(store, create_embedder(f"hash:{DIM}"), SearchSettings(fusion="rrf"))
    scope = Scope.of("bulk")
    out = []
    for query in queries:
        for mode in ("lexical", "semantic", "hybrid"):
            found = await engine.search(SearchRequest(query, scope, (CHUNK_KIND,), 10, mode=mode))  # type: ignore[arg-type]
            ids = [h.item_id for h in found.hits]
            items = await store.read(lambda tx, ids=ids: tx.items.get(ids))
            out.append([(items[h.item_id].uid, round(h.score, 6)) for h in found.hits])
    return out


async def test_a_bulk_loaded_store_holds_the_write_paths_rows_and_answers_the_same(
    store: Store, store_factory, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["store"]
    if backend not in ("sqlite", "postgres"):
        pytest.skip(f"the bench bulk loader covers SQLite and PostgreSQL, not {backend}")
    batches = corpus(Scope.of("bulk"))
    other = await store_factory(tmp_path / "bulk")
    try:
        await build_per_document(store, batches)
        phases = await bulk_build(other, batches, docs_per_tx=5)
        assert phases["total"] >= phases["load"]
        expected, got = await store_fingerprint(store), await store_fingerprint(other)
        assert got == expected
        queries = ["retry", "cache index", "vector lexical planner", "commit rollback budget"]
        assert await answers(other, queries) == await answers(store, queries)
    finally:
        await other.close()


async def test_the_fingerprint_tells_stores_apart_by_one_vector(
    store: Store, store_factory, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["store"]
    if backend not in ("sqlite", "postgres"):
        pytest.skip(f"the bench bulk loader covers SQLite and PostgreSQL, not {backend}")
    batches = corpus(Scope.of("bulk"), documents=3)
    doc, items, vectors = batches[0]
    changed = [(doc, items, vectors[::-1].copy()), *batches[1:]]
    other = await store_factory(tmp_path / "bulk")
    try:
        await build_per_document(store, batches)
        await bulk_build(other, changed)
        expected, got = await store_fingerprint(store), await store_fingerprint(other)
        assert {key for key in expected if expected[key] != got[key]} == {"vectors"}
    finally:
        await other.close()
