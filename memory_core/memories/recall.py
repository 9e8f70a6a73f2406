"""``recall``: hybrid retrieval, RRF, tri-score, MMR, a packed context (spec "Retrieval Policy").

1. The engine's two arms over the space's current entries: sparse (BM25 over text and tags)
   and dense (embeddings; entries without one are simply absent from that arm).
2. Reciprocal rank fusion, k = 60: candidates found by either arm.
3. Tri-score each candidate (:mod:`memory_core.memories.ranking`), relevance = cosine with
   the query when the entry has an embedding, else its normalised sparse score.
4. MMR picks the top N (8-16), then the one packer fits them into the token budget.
5. The context groups the picked entries by their first tag, shows each entry's id and
   ``source_ids``, and shows a long entry's summary instead of its text.
6. ``last_scores`` of every fetched (returned) entry are written back before returning.

When the vector side fails (no embedder yet, vector index unavailable), the sparse arm alone
feeds RRF and the result says so in ``warnings``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memory_core.errors import EmbeddingError, StorageError
from memory_core.kinds import MEMORY
from memory_core.memories.anchors import AnchorCheck, check_anchor
from memory_core.memories.ranking import Candidate, mmr, tri_score, weigh
from memory_core.memories.records import Memory, memory_of, scores_payload, trim_key
from memory_core.memories.responses import RecallHit, Scores
from memory_core.memories.views import anchor_view
from memory_core.memories.write_path import rare_terms
from memory_core.models import ItemUpdate, ScoredId
from memory_core.retrieval.engine import Arms, SearchRequest, default_plan
from memory_core.retrieval.fusion import rrf
from memory_core.retrieval.packer import PackCandidate, pack
from memory_core.scope import Scope
from memory_core.storage.ports import LexicalQuery

if TYPE_CHECKING:
    from memory_core.config import MemorySettings
    from memory_core.context import CoreContext
    from memory_core.storage.ports import Tx

__all__ = ["Ranked", "RecallPlan", "assemble_context", "rank", "retrieve"]

_KINDS = (MEMORY,)
_UNGROUPED = "general"


@dataclass(frozen=True)
class RecallPlan:
    query: str
    scope: Scope
    k: int
    budget_tokens: int
    now: datetime
    include_history: bool = False
    workspace: Path | None = None


@dataclass
class Ranked:
    """What retrieval found and how it ranked it."""

    picked: list[Candidate]
    scored: list[Candidate]
    memories: dict[int, Memory]
    arms: Arms
    warnings: list[str] = field(default_factory=list)
    fused: int = 0
    took_ms: dict[str, float] = field(default_factory=dict)

    def picked_memories(self) -> list[Memory]:
        """The memories MMR picked, in its order."""
        return [self.memories[c.item_id] for c in self.picked]


async def _lexical_plan(ctx: CoreContext, query: str) -> tuple[LexicalQuery, ...] | None:
    """AND over the query's words, then OR over its four rarest: an OR over common words
    scores most of a large space (hundreds of ms at 100k memories) and ranks no better."""
    terms, _ = default_plan(query)
    if len(terms) < 2:
        return None
    rare = await ctx.store.read(lambda tx: rare_terms(tx, terms))
    if not rare:
        return None
    return (LexicalQuery(terms, "AND"), LexicalQuery(rare, "OR"))


async def _arms(ctx: CoreContext, plan: RecallPlan, depth: int) -> Arms:
    # No filter in the arms: superseded entries are few and dropped after fusion, while a
    # filtered arm costs several times more (it ranks on until enough rows pass the filter).
    request = SearchRequest(
        text=plan.query,
        scope=plan.scope,
        kinds=_KINDS,
        k=depth,
        mode="hybrid",
        fetch_k=depth,
        plan=await _lexical_plan(ctx, plan.query),
    )
    try:
        return await ctx.engine.arms(request)
    except (StorageError, EmbeddingError, BaseExceptionGroup) as raised:
        exc = _vector_failure(raised)
        # The vector index is unavailable: the sparse arm alone still answers (spec "Fallback").
        arms = await ctx.engine.arms(
            SearchRequest(
                text=plan.query,
                scope=plan.scope,
                kinds=_KINDS,
                k=depth,
                mode="lexical",
                fetch_k=depth,
                plan=request.plan,
            )
        )
        arms.warnings.append(f"vector search unavailable ({exc.message}): sparse results only")
        return arms


def _vector_failure(raised: BaseException) -> StorageError | EmbeddingError:
    """The storage or embedding error inside ``raised`` (a task group wraps it); anything
    else is re-raised."""
    if isinstance(raised, StorageError | EmbeddingError):
        return raised
    if isinstance(raised, BaseExceptionGroup):
        matched, rest = raised.split((StorageError, EmbeddingError))
        if matched is not None and rest is None:
            first = matched.exceptions[0]
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            assert isinstance(first, StorageError | EmbeddingError)
            return first
    raise raised


async def _vectors(
    ctx: CoreContext, ids: Sequence[int]
) -> tuple[dict[int, np.ndarray], str | None]:
    try:
        found = await ctx.store.read(lambda tx: tx.vectors.vectors(list(ids)))
    except StorageError as exc:
        return {}, f"entry embeddings unavailable ({exc.message}): tag overlap for diversity"
    return found, None


async def rank(ctx: CoreContext, plan: RecallPlan, settings: MemorySettings) -> Ranked:
    """Steps 1-4 of the module docstring (no writes)."""
    started = time.perf_counter()
    depth = max(settings.candidates, plan.k)
    arms = await _arms(ctx, plan, depth)
    warnings = list(arms.warnings)
    ranked_arms: dict[str, list[ScoredId]] = {"lexical": arms.lexical}
    if arms.query_vector is not None:
        ranked_arms["semantic"] = arms.semantic
    fused = rrf(ranked_arms, k=settings.rrf_k)[:depth]
    ids = [f.item_id for f in fused]
    items = await ctx.store.read(lambda tx: tx.items.get(ids))
    memories = {
        i: memory_of(items[i])
        for i in ids
        if i in items and (plan.include_history or items[i].valid_to is None)
    }
    vectors, warning = await _vectors(ctx, list(memories)) if memories else ({}, None)
    if warning:
        warnings.append(warning)
    best_lexical = max((h.score for h in arms.lexical), default=0.0)
    lexical = {h.item_id: h.score for h in arms.lexical}
    query = arms.query_vector
    candidates: list[Candidate] = []
    for item_id, memory in memories.items():
        vector = vectors.get(item_id)
        if query is not None and vector is not None:
            relevance = float(np.dot(query, vector))
        elif best_lexical > 0:
            relevance = lexical.get(item_id, 0.0) / best_lexical
        else:
            relevance = 0.0
        scores = tri_score(
            relevance=relevance,
            created_at=memory.created_at,
            importance=memory.importance,
            now=plan.now,
            tau_days=settings.tau_days,
            alpha=settings.alpha,
            beta=settings.beta,
            gamma=settings.gamma,
        )
        candidates.append(Candidate(item_id, scores, frozenset(memory.tags), vector, memory))
    weighed = weigh(
        [c.scores for c in candidates],
        alpha=settings.alpha,
        beta=settings.beta,
        gamma=settings.gamma,
        normalise=settings.score_normalisation == "minmax",
        relevance_gate=settings.relevance_gate,
    )
    for candidate, score in zip(candidates, weighed, strict=True):
        candidate.scores = score
    picked = mmr(
        candidates,
        k=plan.k,
        lam=settings.mmr_lambda,
        scale=settings.alpha + settings.beta + settings.gamma,
    )
    took = dict(arms.took_ms)
    took["rank"] = round((time.perf_counter() - started) * 1000, 3)
    return Ranked(picked, candidates, memories, arms, warnings, fused=len(fused), took_ms=took)


def _display(memory: Memory) -> tuple[str, bool]:
    if memory.summary:
        return memory.summary, True
    return memory.text, False


def _line(memory: Memory) -> str:
    text, _ = _display(memory)
    flat = " ".join(text.split())
    sources = f"; sources: {', '.join(memory.source_ids)}" if memory.source_ids else ""
    return f"- {flat} (id {memory.memory_id[:12]}{sources})"


def _group(memory: Memory) -> str:
    return memory.tags[0] if memory.tags else _UNGROUPED


def assemble_context(
    picked: Sequence[Memory], *, budget_tokens: int, count: Any, truncate: Any
) -> tuple[list[Memory], str, int]:
    """Pack ``picked`` (best first) into the budget and render the context grouped by tag.

    Returns the entries that fit, the context text and its token count (never over budget).
    """
    headers = {g: f"## {g}" for g in dict.fromkeys(_group(m) for m in picked)}
    reserve = sum(count(h) + 1 for h in headers.values())
    chosen = list(picked)
    while True:
        offered = [
            PackCandidate(
                chunk_id=m.memory_id, doc_id=_group(m), text=_line(m), tokens=count(_line(m))
            )
            for m in chosen
        ]
        packed = pack(
            offered,
            budget_tokens=max(0, budget_tokens - reserve),
            truncate=truncate,
            count=count,
            separator="\n",
        )
        by_id = {m.memory_id: m for m in chosen}
        fitted = [by_id[c.chunk_id] for c in packed.chunks]
        lines = {c.chunk_id: c.text for c in packed.chunks}
        groups: dict[str, list[str]] = {}
        for memory in fitted:
            groups.setdefault(_group(memory), []).append(lines[memory.memory_id])
        text = "\n\n".join(f"{headers[g]}\n" + "\n".join(rows) for g, rows in groups.items())
        used = count(text) if text else 0
        if used <= budget_tokens or not chosen:
            return fitted, text, used
        chosen = fitted[:-1]  # tokenisation across lines cost a little more: drop the last one


def hits(
    fitted: Sequence[Memory], scored: dict[int, Candidate], anchors: dict[int, AnchorCheck]
) -> list[RecallHit]:
    out: list[RecallHit] = []
    for memory in fitted:
        scores = scored[memory.item_id].scores
        _text, summary_used = _display(memory)
        out.append(
            RecallHit(
                id=memory.memory_id,
                text=memory.text,
                summary_used=summary_used,
                tags=list(memory.tags),
                source_ids=list(memory.source_ids),
                created_at=memory.created_at,
                category=memory.category,
                pinned=memory.pinned,
                scores=Scores(
                    relevance=round(scores.relevance, 6),
                    recency=round(scores.recency, 6),
                    importance=round(scores.importance, 6),
                    total=round(scores.total, 6),
                ),
                anchor=anchor_view(memory, anchors.get(memory.item_id)),
            )
        )
    return out


def check_anchors(fitted: Sequence[Memory], workspace: Path | None) -> dict[int, AnchorCheck]:
    return {m.item_id: check_anchor(m.anchor, workspace) for m in fitted if m.anchor}


def persist_scores(tx: Tx, scored: Sequence[Candidate], stamp: str) -> int:
    """Write ``last_scores`` (and the trim key) of each ranked entry (spec "Score Persistence")."""
    current = tx.items.get([c.item_id for c in scored])
    written = 0
    # Rows are updated in id order: two recalls of overlapping entries (a team server's
    # processes on one PostgreSQL) lock them in the same order and never deadlock.
    for candidate in sorted(scored, key=lambda c: c.item_id):
        item = current.get(candidate.item_id)
        if item is None:  # forgotten meanwhile
            continue
        s = candidate.scores
        metadata = dict(item.metadata)
        metadata["last_scores"] = scores_payload(
            s.relevance, s.recency, s.importance, s.total, stamp
        )
        metadata["scores_at"] = stamp
        metadata["trim_key"] = trim_key(s.total)
        tx.items.update(candidate.item_id, ItemUpdate(metadata=metadata))
        written += 1
    return written


async def retrieve(ctx: CoreContext, plan: RecallPlan, settings: MemorySettings) -> Ranked:
    """Rank (no writes); the caller packs, checks anchors and persists the scores."""
    return await rank(ctx, plan, settings)
