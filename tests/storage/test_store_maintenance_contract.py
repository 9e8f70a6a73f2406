"""Store contract: the embedder claim, stats, doctor findings, re-embedding and compaction."""

from __future__ import annotations

import numpy as np
import pytest
from store_testkit import DIM, unit_vectors

from memory_core.errors import EmbedderMismatchError
from memory_core.models import EMBED_TEXT_KEY, NewItem
from memory_core.scope import Scope
from memory_core.storage.ports import LexicalQuery, Store

pytestmark = pytest.mark.anyio

TEXTS = ("postgres index tuning", "sourdough bread", "mysql fulltext search")


async def _add(store: Store, scope: Scope) -> list[int]:
    items = [
        NewItem(uid=f"u{i}", kind="chunk", text=t, token_count=len(t.split()), scope=scope)
        for i, t in enumerate(TEXTS)
    ]
    return await store.write(lambda tx: tx.items.add(items, unit_vectors(len(items))))


async def test_the_embedder_claim_holds_and_a_different_one_is_refused(store: Store) -> None:
    assert await store.ensure_embedder("hash:contract", DIM) is False  # claimed when opened
    with pytest.raises(EmbedderMismatchError, match="hash:other"):
        await store.ensure_embedder("hash:other", DIM)
    with pytest.raises(EmbedderMismatchError, match=str(DIM + 1)):
        await store.ensure_embedder("hash:contract", DIM + 1)


async def test_stats_count_the_items_and_name_the_backend_and_embedder(
    store: Store, scope: Scope
) -> None:
    await _add(store, scope)
    stats = await store.stats()
    assert stats.backend == store.backend
    assert stats.counts["item"] == len(TEXTS)
    assert stats.items_by_kind == {"chunk": len(TEXTS)}
    assert (stats.embedder_id, stats.embedding_dim) == ("hash:contract", DIM)
    assert stats.vectors == len(TEXTS)
    assert stats.schema_migrations  # at least the first migration is recorded


async def test_doctor_reports_an_embedder_other_than_the_configured_one(store: Store) -> None:
    same = await store.diagnose(configured_embedder="hash:contract")
    assert [f for f in same if f.status == "error"] == []
    other = await store.diagnose(configured_embedder="hash:other")
    flagged = [f for f in other if f.status == "error"]
    assert len(flagged) == 1
    assert flagged[0].check.startswith("embedder")
    assert "hash:other" in flagged[0].message
    assert "reembed" in (flagged[0].fix or "")


async def test_reembed_replaces_every_vector_and_records_the_new_embedder(
    store: Store, scope: Scope
) -> None:
    ids = await _add(store, scope)
    dimension = DIM + 4
    fresh = np.eye(len(TEXTS), dimension, dtype=np.float32)
    seen: list[tuple[int, int]] = []

    async def embed(texts: list[str]) -> np.ndarray:
        return np.vstack([fresh[TEXTS.index(t)] for t in texts])

    count = await store.reembed(
        embed, "hash:new", dimension, progress=lambda done, total: seen.append((done, total))
    )
    assert count == len(TEXTS)
    assert seen[-1] == (len(TEXTS), len(TEXTS))
    stats = await store.stats()
    assert (stats.embedder_id, stats.embedding_dim, stats.vectors) == (
        "hash:new",
        dimension,
        len(TEXTS),
    )
    assert await store.ensure_embedder("hash:new", dimension) is False
    with pytest.raises(EmbedderMismatchError):
        await store.ensure_embedder("hash:contract", DIM)
    await store.prepare_vectors(scope)
    hits = await store.vector_search(fresh[1], scope, k=1)
    assert [h.item_id for h in hits.hits] == [ids[1]]
    lexical = await store.read(lambda tx: tx.lexical.search(LexicalQuery(("sourdough",)), scope))
    assert [h.item_id for h in lexical] == [ids[1]]  # the lexical index survives the swap


async def test_reembed_embeds_the_text_an_item_records_as_embedded_not_its_item_text(
    store: Store, scope: Scope
) -> None:
    # A directive is stored as its statement but embedded with its rule title and heading.
    embedded = "Security. Never commit secrets"
    item = NewItem(
        uid="d1",
        kind="directive",
        text="Never commit secrets",
        token_count=3,
        scope=scope,
        metadata={EMBED_TEXT_KEY: embedded},
    )
    await _add(store, scope)
    await store.write(lambda tx: tx.items.add([item], unit_vectors(1)))
    seen: list[str] = []

    async def embed(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return unit_vectors(len(texts))

    await store.reembed(embed, "hash:new", DIM)

    assert sorted(seen) == sorted([*TEXTS, embedded])


async def test_compact_reports_the_size_before_and_after(store: Store, scope: Scope) -> None:
    await _add(store, scope)
    result = await store.compact()
    assert {"file_bytes_before", "file_bytes_after"} <= set(result)
