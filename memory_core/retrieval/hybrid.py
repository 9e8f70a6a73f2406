"""The hybrid search engine every feature shares: lexical arm + vector arm + fusion in Python.

``hybrid_search`` is the one entry point. The arms run as separate statements (the lexical one
while the query is being embedded), fuse with RRF or weighted fusion from the settings, and
every hit keeps each arm's raw score and rank, so callers can explain and threshold. When the
embedder is still loading, hybrid mode serves lexical results and says so in ``warnings``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import numpy as np
import structlog

from memory_core.errors import InvalidInputError
from memory_core.models import ScoredId
from memory_core.retrieval.fusion import FusedHit, fuse
from memory_core.retrieval.rewrite import rewrite_query, sanitised_literal
from memory_core.retrieval.vector_cache import top_k, vector_cache_for
from memory_core.storage.sqlite.doc_search import LexicalOutcome, lexical_arm, vector_arm
from memory_core.storage.sqlite.doc_vectors import matching_item_ids

if TYPE_CHECKING:
    from memory_core.service import CoreContext

__all__ = ["ArmScore", "Hit", "SearchMode", "SearchOutcome", "hybrid_search", "search"]

log = structlog.get_logger(__name__)

SearchMode = Literal["hybrid", "lexical", "semantic"]
FilterSql = tuple[str, list[Any]] | None
_MAX_K = 10_000


@dataclass(frozen=True, slots=True)
class ArmScore:
    """One arm's raw score and 1-based rank for a hit.

    For the lexical arm ``raw`` is FTS5's bm25 (negative; more negative is better) and
    ``score`` is ``-raw``; for the semantic arm ``raw`` is the cosine distance and ``score`` the
    cosine similarity ``1 - raw``. ``score`` is higher-better in both.
    """

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
    took_ms: dict[str, float] = field(default_factory=dict)


def _hit(fused: FusedHit, single: str | None) -> Hit:
    lexical = fused.arms.get("lexical")
    semantic = fused.arms.get("semantic")
    lex = ArmScore(-lexical.score, lexical.score, lexical.rank) if lexical else None
    sem = ArmScore(semantic.score, 1.0 - semantic.score, semantic.rank) if semantic else None
    score = fused.score
    # A single arm reports its own (higher-better) score, so thresholds keep their meaning.
    if single == "lexical" and lex:
        score = lex.score
    elif single == "semantic" and sem:
        score = sem.score
    return Hit(fused.item_id, score, lex, sem)


async def search(
    ctx: CoreContext,
    query: str,
    *,
    scope: str | None,
    kinds: Sequence[str],
    k: int,
    mode: SearchMode = "hybrid",
    filter_sql: FilterSql = None,
    lexical_text: str | None = None,
    semantic_text: str | None = None,
    fetch_k: int | None = None,
    enough: int | None = None,
) -> SearchOutcome:
    """Run the search and return hits with the engine's diagnostics.

    Args:
        ctx: the open store and models.
        query: the query text (both arms, unless overridden).
        scope: the scope to search (None: every scope).
        kinds: item kinds to search (e.g. ``("chunk",)``).
        k: how many fused hits to return (ties at the cut are kept, so callers can apply
            their own tie-breaks).
        mode: ``hybrid`` (both arms), ``lexical`` or ``semantic``.
        filter_sql: a parameterised SQL fragment over ``item`` / ``resource``.
        lexical_text: text for the lexical arm instead of ``query`` (RQL ``lexical()``).
        semantic_text: text for the vector arm instead of ``query`` (RQL ``semantic()``).
        fetch_k: candidates per arm (default ``max(50, 3 k)``).
        enough: AND-query hits that make the OR fallback unnecessary (default ``k``).

    Raises:
        InvalidInputError: the query is empty or ``k`` is out of range.
    """
    import time

    started = time.perf_counter()
    lexical_text = query if lexical_text is None else lexical_text
    semantic_text = query if semantic_text is None else semantic_text
    if not (lexical_text.strip() or semantic_text.strip()):
        raise InvalidInputError(
            "the query is empty", hint="pass some words to search for, e.g. memoir search 'retry'"
        )
    if not 1 <= k <= _MAX_K:
        raise InvalidInputError(f"k={k} is out of range", hint=f"use k between 1 and {_MAX_K}")
    settings = ctx.settings.search
    depth = min(4096, fetch_k or max(50, 3 * k))
    outcome = SearchOutcome(hits=[], mode=mode, fusion=settings.fusion)
    use_lexical = mode in ("hybrid", "lexical") and bool(lexical_text.strip())
    use_semantic = mode in ("hybrid", "semantic") and bool(semantic_text.strip())
    if use_semantic and mode == "hybrid" and not ctx.embedder.is_ready():
        ctx.embedder.start_loading()
        use_semantic = False
        outcome.warnings.append(
            "the embedding model is still loading: lexical results only (retry in a few seconds)"
        )
        outcome.mode = "lexical"

    rewritten = rewrite_query(lexical_text) if use_lexical else None
    if rewritten is not None:
        outcome.lexical_terms = rewritten.terms
        if not rewritten.terms:
            use_lexical = False
            outcome.warnings.append("the lexical query has no searchable words")
    db = ctx.store.db  # type: ignore[attr-defined]
    lex_result: list[LexicalOutcome] = []
    vec_result: list[tuple[list[ScoredId], str]] = []

    async def run_lexical() -> None:
        t0 = time.perf_counter()
        assert rewritten is not None
        fallback = sanitised_literal(lexical_text)
        result = await db.read(
            lambda conn: lexical_arm(
                conn,
                and_match=rewritten.and_match,
                or_match=rewritten.or_match,
                fallback_match=fallback or None,
                scope=scope,
                kinds=kinds,
                limit=depth,
                enough=enough or k,
                flt=filter_sql,
            )
        )
        lex_result.append(result)
        outcome.took_ms["lexical"] = round((time.perf_counter() - t0) * 1000, 3)

    async def run_semantic() -> None:
        t0 = time.perf_counter()
        await ctx.embedder.ensure_loaded()
        vector: np.ndarray = await ctx.embedder.embed_query(semantic_text)
        t1 = time.perf_counter()
        outcome.took_ms["embed"] = round((t1 - t0) * 1000, 3)
        cache = vector_cache_for(ctx)
        entry = await cache.lookup(ctx, scope, kinds) if cache is not None else None
        if entry is not None:
            allowed = None
            if filter_sql is not None:
                where, params = filter_sql
                allowed = await db.read(
                    lambda conn: matching_item_ids(conn, scope, kinds, where, params)
                )
            # Off the event loop: the lexical arm's result handling need not wait for numpy.
            hits = await anyio.to_thread.run_sync(top_k, entry, vector, depth, allowed)
            vec_result.append((hits, "cache+filter" if filter_sql else "cache"))
        else:
            result = await db.read(
                lambda conn: vector_arm(
                    conn, vector, scope=scope, kinds=kinds, k=depth, flt=filter_sql
                )
            )
            vec_result.append(result)
        outcome.took_ms["semantic"] = round((time.perf_counter() - t1) * 1000, 3)

    async with anyio.create_task_group() as group:
        if use_semantic:
            group.start_soon(run_semantic)
        if use_lexical:
            group.start_soon(run_lexical)

    arms: dict[str, list[ScoredId]] = {}
    if lex_result:
        result = lex_result[0]
        arms["lexical"] = result.hits
        outcome.lexical_operator = result.operator
        outcome.lexical_candidates = len(result.hits)
        if result.warning:
            outcome.warnings.append(result.warning)
    if vec_result:
        hits, strategy = vec_result[0]
        # Fusion wants higher-better similarities; ArmScore.raw keeps the distance.
        arms["semantic"] = [ScoredId(h.item_id, 1.0 - h.score) for h in hits]
        outcome.vector_strategy = strategy
        outcome.semantic_candidates = len(hits)

    single = next(iter(arms)) if len(arms) == 1 else None
    fused = fuse(
        arms,
        method=settings.fusion,
        weights={"lexical": settings.bm25_weight, "semantic": settings.vector_weight},
        higher_is_better={"lexical": False, "semantic": True},
        rrf_k=settings.rrf_k,
    )
    hits_out = [_hit(f, single) for f in fused]
    if single:
        hits_out.sort(key=lambda h: (-h.score, h.item_id))
    if len(hits_out) > k:
        boundary = hits_out[k - 1].score
        cut = k
        while cut < len(hits_out) and hits_out[cut].score == boundary:
            cut += 1
        hits_out = hits_out[:cut]
    outcome.hits = hits_out
    outcome.took_ms["total"] = round((time.perf_counter() - started) * 1000, 3)
    return outcome


async def hybrid_search(
    ctx: CoreContext,
    query: str,
    *,
    scope: str | None,
    kinds: Sequence[str],
    k: int,
    mode: SearchMode = "hybrid",
    filter_sql: FilterSql = None,
) -> list[Hit]:
    """The fused hits of :func:`search` (see there), best first.

    Raises:
        InvalidInputError: the query is empty or ``k`` is out of range.
    """
    outcome = await search(
        ctx, query, scope=scope, kinds=kinds, k=k, mode=mode, filter_sql=filter_sql
    )
    for warning in outcome.warnings:
        log.info("search warning", warning=warning)
    return outcome.hits
