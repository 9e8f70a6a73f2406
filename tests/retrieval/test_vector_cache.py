"""The SQLite store's in-process matrix: exact, and never stale."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.retrieval.engine import SearchRequest
from memory_core.scope import Scope
from memory_core.service import Memoir
from memory_core.storage.sqlite.vector_cache import CachedVectors, top_k

pytestmark = pytest.mark.anyio


def test_top_k_orders_by_similarity_then_id_and_honours_allowed_ids() -> None:
    matrix = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], dtype=np.float32)
    entry = CachedVectors("0:0", np.array([5, 6, 7, 8]), matrix)
    query = np.array([1, 0], dtype=np.float32)
    assert [h.item_id for h in top_k(entry, query, 3, None)] == [5, 7, 8]
    assert [h.item_id for h in top_k(entry, query, 2, np.array([6, 7]))] == [7, 6]
    assert top_k(entry, query, 5, np.array([], dtype=np.int64)) == []


async def test_the_matrix_serves_fresh_vectors_and_is_dropped_on_change(tmp_path: Path) -> None:
    settings = load_settings({"search": {"vector_cache_min_items": 0}}, cwd=tmp_path, environ={})
    memoir = await Memoir.open(
        f"sqlite:///{tmp_path}/m.db", settings=settings, embedder=create_embedder("hash:384")
    )
    try:
        docs = memoir.documents
        await docs.add_text("alpha beta gamma", path="a.md", scope="s")
        await docs.add_text("delta epsilon", path="b.md", scope="s")
        scope = Scope.of("s")
        assert await memoir.store.prepare_vectors(scope, ["chunk"])
        request = SearchRequest("alpha beta", scope, ("chunk",), 2, mode="semantic")
        warm = await memoir.context.engine.search(request)
        assert warm.vector_strategy == "cache"
        cold_ids = {h.item_id for h in warm.hits}
        await docs.add_text("zeta eta theta", path="a.md", scope="s")  # replaces a.md's chunk
        after = await memoir.context.engine.search(request)
        assert after.vector_strategy != "cache"  # the stamp moved: vec0 answers meanwhile
        live = await memoir.store.read(lambda tx: tx.items.get([h.item_id for h in after.hits]))
        assert "alpha beta gamma" not in {item.text for item in live.values()}
        assert cold_ids != {h.item_id for h in after.hits}
    finally:
        await memoir.close()
