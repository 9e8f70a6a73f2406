from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from memory_core.context import CoreContext
from memory_core.documents.fel import parse_filter
from memory_core.embed import create_embedder
from memory_core.errors import InvalidInputError
from memory_core.filters import Filter
from memory_core.retrieval.engine import Hit, SearchEngine, SearchMode, SearchRequest
from memory_core.scope import Scope
from memory_core.service import Memoir

pytestmark = pytest.mark.anyio


class LoadingEmbedder:
    """The hashing embedder, pretending its model is still loading (a fake at the seam)."""

    def __init__(self) -> None:
        self._inner = create_embedder("hash:384")
        self.load_requested = False

    @property
    def embedder_id(self) -> str:
        return self._inner.embedder_id

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def is_ready(self) -> bool:
        return False

    def start_loading(self) -> None:
        self.load_requested = True

    async def ensure_loaded(self) -> None:
        return None

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return await self._inner.embed_documents(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        return await self._inner.embed_query(text)


async def hybrid_search(
    ctx: CoreContext,
    text: str,
    *,
    scope: str,
    kinds: Sequence[str],
    k: int,
    mode: SearchMode = "hybrid",
    where: Filter | None = None,
) -> list[Hit]:
    request = SearchRequest(text, Scope.of(scope), tuple(kinds), k, mode=mode, where=where)  # type: ignore[arg-type]
    return (await ctx.engine.search(request)).hits


async def _corpus(memoir: Memoir) -> None:
    docs = memoir.documents
    await docs.add_text("Retries use exponential backoff with jitter.", path="a.md", scope="s")
    await docs.add_text("Blue green deploys give zero downtime.", path="b.md", scope="s")
    for i in range(60):
        tags = ["rare"] if i in (7, 42) else ["common"]
        await docs.add_text(
            f"Filler note {i} about deploy logs.", path=f"f/{i}.md", scope="s", tags=tags
        )


async def test_hits_carry_each_arms_raw_score_and_rank(memoir: Memoir) -> None:
    await _corpus(memoir)
    hits = await hybrid_search(
        memoir.context, "exponential backoff", scope="s", kinds=["chunk"], k=3
    )
    top = hits[0]
    assert top.lexical is not None and top.semantic is not None
    assert top.lexical.raw < 0 and top.lexical.score == -top.lexical.raw  # bm25 is negative
    assert top.semantic.score == pytest.approx(1 - top.semantic.raw)
    assert top.lexical.rank == 1


async def test_scope_isolates_results(memoir: Memoir) -> None:
    await _corpus(memoir)
    await memoir.documents.add_text("exponential secret", path="x.md", scope="other")
    hits = await hybrid_search(memoir.context, "exponential", scope="other", kinds=["chunk"], k=10)
    assert len(hits) == 1


async def test_falls_back_to_lexical_while_the_embedder_loads(memoir: Memoir) -> None:
    await _corpus(memoir)
    loading = LoadingEmbedder()
    engine = SearchEngine(memoir.store, loading, memoir.settings.search)  # type: ignore[arg-type]
    outcome = await engine.search(SearchRequest("backoff", Scope.of("s"), ("chunk",), 5))
    assert outcome.mode == "lexical"
    assert any("loading" in w for w in outcome.warnings)
    assert loading.load_requested
    assert outcome.hits and all(h.semantic is None for h in outcome.hits)


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "semantic"])
async def test_selective_filters_never_starve_results(memoir: Memoir, mode: str) -> None:
    await _corpus(memoir)
    hits = await hybrid_search(
        memoir.context,
        "deploy logs note",
        scope="s",
        kinds=["chunk"],
        k=5,
        mode=mode,  # type: ignore[arg-type]
        where=parse_filter("doc.tag = 'rare'"),
    )
    assert len(hits) == 2  # min(k, matches)


async def test_empty_query_and_bad_k_are_refused(memoir: Memoir) -> None:
    with pytest.raises(InvalidInputError):
        await hybrid_search(memoir.context, "   ", scope="s", kinds=["chunk"], k=3)
    with pytest.raises(InvalidInputError):
        await hybrid_search(memoir.context, "x", scope="s", kinds=["chunk"], k=0)
