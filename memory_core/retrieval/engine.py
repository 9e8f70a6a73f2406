"""The one hybrid search engine: a lexical arm, a vector arm, fusion, a cut at k.

Every feature searches through :class:`SearchEngine` (documents, the hierarchy, rules, agent
memories, the memory layer), with a scope, item kinds, an optional filter and k. The arms are
separate statements on the store's ports (a vec0 KNN joined with an FTS5 MATCH defeats both
indexes): the lexical plan runs in the store's reader while this task embeds the query, then
the two rankings fuse in Python (RRF or weighted, from the settings). Every hit keeps each
arm's score and rank, so callers can explain, threshold and re-score (rules add their graph
and severity terms on top; memories their recency and importance).

When the embedder is still loading, hybrid mode answers from the lexical arm with a warning,
unless the request asks to wait (a bounded wait: one-shot commands and rules queries, whose
first answer must be as good as the hundredth).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio
import numpy as np

from memory_core.config import SearchSettings
from memory_core.embed.base import Embedder
from memory_core.errors import EmbeddingError, InvalidInputError
from memory_core.filters import Filter
from memory_core.kinds import ItemKind
from memory_core.models import ScoredId
from memory_core.retrieval.fusion import FusedHit, fuse
from memory_core.retrieval.rewrite import rewrite_query
from memory_core.scope import Scope
from memory_core.storage.ports import LexicalQuery, Store

__all__ = [
    "MAX_K",
    "ArmScore",
    "Arms",
    "Hit",
    "SearchEngine",
    "SearchMode",
    "SearchOutcome",
    "SearchRequest",
    "default_plan",
]

SearchMode = Literal["hybrid", "lexical", "semantic"]
MAX_K = 10_000
EMBEDDER_LOADING = (
    "the embedding model is still loading: lexical results only (retry in a few seconds)"
)


@dataclass(frozen=True, slots=True)
class ArmScore:
    """One arm's view of a hit: its higher-better ``score``, the backend's ``raw`` number
    (bm25, negative and lower-better, for the lexical arm; the cosine distance for the
    semantic arm) and its 1-based ``rank``."""

    score: float
    raw: float
    rank: int


@dataclass(frozen=True, slots=True)
class Hit:
    """A fused hit: the item id, the fused score, and each arm's view of it."""

    item_id: int
    score: float
    lexical: ArmScore | None = None
    semantic: ArmScore | None = None


@dataclass(frozen=True)
class SearchRequest:
    """What to search for.

    Args:
        text: the query (both arms, unless ``lexical_text`` / ``semantic_text`` override).
        scope: where to search (None: every scope; admin tools only).
        kinds: item kinds to search.
        k: fused hits to return (ties at the cut are kept, so callers can tie-break).
        mode: ``hybrid``, ``lexical`` or ``semantic``.
        where: a filter both arms apply without starving.
        fetch_k: candidates per arm (default ``max(50, 3 k)``).
        enough: lexical hits after which the plan stops (default ``k``).
        plan: the lexical queries to run in order until ``enough`` hits (default: AND over
            the rewritten terms, then OR).
        wait_for_embedder: seconds to wait for a loading embedder before answering
            lexically (0: never wait).
    """

    text: str
    scope: Scope | None
    kinds: tuple[ItemKind, ...]
    k: int
    mode: SearchMode = "hybrid"
    where: Filter | None = None
    lexical_text: str | None = None
    semantic_text: str | None = None
    fetch_k: int | None = None
    enough: int | None = None
    plan: tuple[LexicalQuery, ...] | None = None
    wait_for_embedder: float = 0.0


@dataclass
class Arms:
    """What the two arms found, before fusion (ids best first, scores higher-better)."""

    lexical: list[ScoredId] = field(default_factory=list)
    semantic: list[ScoredId] = field(default_factory=list)
    query_vector: np.ndarray | None = None
    lexical_operator: str = "none"
    lexical_terms: tuple[str, ...] = ()
    vector_strategy: str = "none"
    warnings: list[str] = field(default_factory=list)
    took_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class SearchOutcome:
    """Hits plus what the engine did (for ``--explain`` and run records)."""

    hits: list[Hit]
    mode: SearchMode
    fusion: str
    warnings: list[str] = field(default_factory=list)
    lexical_operator: str = "none"
    lexical_terms: tuple[str, ...] = ()
    vector_strategy: str = "none"
    lexical_candidates: int = 0
    semantic_candidates: int = 0
    query_vector: np.ndarray | None = None
    took_ms: dict[str, float] = field(default_factory=dict)


def default_plan(text: str) -> tuple[tuple[str, ...], tuple[LexicalQuery, ...]]:
    """The rewritten terms of ``text`` and the default plan over them: AND, then OR."""
    terms = rewrite_query(text).terms
    if not terms:
        return terms, ()
    if len(terms) == 1:
        return terms, (LexicalQuery(terms, "OR"),)
    return terms, (LexicalQuery(terms, "AND"), LexicalQuery(terms, "OR"))


def _check(request: SearchRequest) -> None:
    lexical = request.text if request.lexical_text is None else request.lexical_text
    semantic = request.text if request.semantic_text is None else request.semantic_text
    if not (lexical.strip() or semantic.strip()):
        raise InvalidInputError(
            "the query is empty", hint="pass some words to search for, e.g. memoir search 'retry'"
        )
    if not 1 <= request.k <= MAX_K:
        raise InvalidInputError(
            f"k={request.k} is out of range", hint=f"use k between 1 and {MAX_K}"
        )


class SearchEngine:
    """Hybrid search over one store with one embedder (see the module docstring)."""

    def __init__(self, store: Store, embedder: Embedder, settings: SearchSettings) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings

    async def _ready(self, wait: float) -> bool:
        if self.embedder.is_ready():
            return True
        self.embedder.start_loading()
        if wait <= 0:
            return False
        with anyio.move_on_after(wait):
            await self.embedder.ensure_loaded()
        return self.embedder.is_ready()

    async def arms(self, request: SearchRequest) -> Arms:
        """Run both arms (as the mode and the embedder allow) without fusing them.

        Raises:
            InvalidInputError: the query is empty or ``k`` is out of range.
        """
        _check(request)
        arms = Arms()
        depth = min(4096, request.fetch_k or max(50, 3 * request.k))
        lexical_text = request.text if request.lexical_text is None else request.lexical_text
        semantic_text = request.text if request.semantic_text is None else request.semantic_text
        use_lexical = request.mode in ("hybrid", "lexical") and bool(lexical_text.strip())
        use_semantic = request.mode in ("hybrid", "semantic") and bool(semantic_text.strip())
        hybrid = request.mode == "hybrid"
        if use_semantic and hybrid and not await self._ready(request.wait_for_embedder):
            use_semantic = False
            arms.warnings.append(EMBEDDER_LOADING)
        plan: tuple[LexicalQuery, ...] = ()
        if use_lexical:
            if request.plan is not None:
                plan = request.plan
                arms.lexical_terms = tuple(dict.fromkeys(t for q in plan for t in q.terms))
            else:
                arms.lexical_terms, plan = default_plan(lexical_text)
            if not plan:
                use_lexical = False
                arms.warnings.append("the lexical query has no searchable words")
        enough = request.enough or request.k

        async def run_lexical() -> None:
            started = time.perf_counter()
            scope, kinds, where = request.scope, request.kinds, request.where

            def search(tx):  # type: ignore[no-untyped-def]
                hits: list[ScoredId] = []
                operator = "none"
                for query in plan:
                    found = tx.lexical.search(query, scope, kinds=kinds, where=where, limit=depth)
                    if found or not hits:
                        hits, operator = found, query.operator
                    if len(hits) >= enough:
                        break
                return hits, operator

            arms.lexical, arms.lexical_operator = await self.store.read(search)
            arms.took_ms["lexical"] = round((time.perf_counter() - started) * 1000, 3)

        async def run_semantic() -> None:
            started = time.perf_counter()
            try:
                await self.embedder.ensure_loaded()
                vector = await self.embedder.embed_query(semantic_text)
            except EmbeddingError as exc:
                arms.warnings.append(f"semantic search unavailable: {exc.message}")
                return
            embedded = time.perf_counter()
            arms.took_ms["embed"] = round((embedded - started) * 1000, 3)
            arms.query_vector = vector
            found = await self.store.vector_search(
                vector, request.scope, kinds=request.kinds, where=request.where, k=depth
            )
            arms.semantic, arms.vector_strategy = found.hits, found.strategy
            arms.took_ms["semantic"] = round((time.perf_counter() - embedded) * 1000, 3)

        async with anyio.create_task_group() as group:
            if use_semantic:
                group.start_soon(run_semantic)
            if use_lexical:
                group.start_soon(run_lexical)
        return arms

    def fuse(self, arms: Arms, k: int) -> list[Hit]:
        """Fuse the arms with the configured method and cut at ``k`` (ties at the cut kept)."""
        ranked: dict[str, list[ScoredId]] = {}
        if arms.lexical or arms.lexical_operator != "none":
            ranked["lexical"] = arms.lexical
        if arms.semantic or arms.vector_strategy != "none":
            ranked["semantic"] = arms.semantic
        single = next(iter(ranked)) if len(ranked) == 1 else None
        fused = fuse(
            ranked,
            method=self.settings.fusion,
            weights={"lexical": self.settings.bm25_weight, "semantic": self.settings.vector_weight},
            higher_is_better={"lexical": True, "semantic": True},
            rrf_k=self.settings.rrf_k,
        )
        hits = [_hit(f, single) for f in fused]
        if single:
            hits.sort(key=lambda h: (-h.score, h.item_id))
        if len(hits) > k:
            boundary = hits[k - 1].score
            cut = k
            while cut < len(hits) and hits[cut].score == boundary:
                cut += 1
            hits = hits[:cut]
        return hits

    async def search(self, request: SearchRequest) -> SearchOutcome:
        """Both arms, fused and cut at ``request.k``.

        Raises:
            InvalidInputError: the query is empty or ``k`` is out of range.
        """
        started = time.perf_counter()
        arms = await self.arms(request)
        outcome = SearchOutcome(
            hits=self.fuse(arms, request.k),
            mode=request.mode,
            fusion=self.settings.fusion,
            warnings=list(arms.warnings),
            lexical_operator=arms.lexical_operator,
            lexical_terms=arms.lexical_terms,
            vector_strategy=arms.vector_strategy,
            lexical_candidates=len(arms.lexical),
            semantic_candidates=len(arms.semantic),
            query_vector=arms.query_vector,
            took_ms=dict(arms.took_ms),
        )
        if request.mode == "hybrid" and arms.query_vector is None:
            outcome.mode = "lexical"
        outcome.took_ms["total"] = round((time.perf_counter() - started) * 1000, 3)
        return outcome

    async def similarities(
        self,
        vector: np.ndarray,
        item_ids: Sequence[int],
        *,
        scope: Scope | None,
        kinds: Sequence[ItemKind] = (),
    ) -> dict[int, float]:
        """Cosine similarity of ``vector`` to each item's stored vector (re-scoring stages)."""
        return await self.store.similarities(vector, item_ids, scope=scope, kinds=kinds)


def _hit(fused: FusedHit, single: str | None) -> Hit:
    lexical = fused.arms.get("lexical")
    semantic = fused.arms.get("semantic")
    lex = ArmScore(lexical.score, -lexical.score, lexical.rank) if lexical else None
    sem = ArmScore(semantic.score, 1.0 - semantic.score, semantic.rank) if semantic else None
    score = fused.score
    # A single arm reports its own (higher-better) score, so thresholds keep their meaning.
    if single == "lexical" and lex:
        score = lex.score
    elif single == "semantic" and sem:
        score = sem.score
    return Hit(fused.item_id, score, lex, sem)
