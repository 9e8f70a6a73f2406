"""The ranking stage of ``query_directives``: gate, then order the candidates (pure).

Each candidate arrives with the seed-003 total (severity, layer, ...), its task relevance
(:func:`~memory_core.rules.relevance.relevance`), its cosine similarity, its rank in the
lexical arm and cheap cross features: how many task words its heading path and its file name
share. The order is

    relevance_weight × relevance + total
    + fusion_weight × RRF(relevance rank, lexical rank, similarity rank)
    + heading_weight × heading overlap + file_weight × file-name overlap
    − length_weight × tokens / 10

where RRF is the reciprocal-rank fusion of the three rankings, scaled so that first place in
one ranking is worth 1. The defaults were chosen on the public dev set
(``bench/rules_eval/tune_rank.py``, leave one repository out); with ``fusion_weight``,
``heading_weight`` and ``file_weight`` at 0 the order is the one before the fusion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_core.rules.relevance import RelevanceGate

__all__ = ["Candidate", "RankParams", "heading_overlap", "rank_candidates"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate directive as the ranking stage sees it.

    Attributes:
        item_id: the directive's item id (ties are broken by it).
        total: the seed-003 weighted total.
        relevance: task relevance (similarity units, 0..~1.5).
        semantic: cosine similarity with the task (0 when unavailable).
        lexical_rank: 0-based rank in the lexical arm, or None when it did not match.
        heading: task words found in the directive's heading path (0..).
        file: task words found in its file's name (0..).
        tokens: the directive's length in tokens.
    """

    item_id: int
    total: float
    relevance: float
    semantic: float = 0.0
    lexical_rank: int | None = None
    heading: float = 0.0
    file: float = 0.0
    tokens: int = 0


@dataclass(frozen=True)
class RankParams:
    """Weights of the order (see the module docstring)."""

    relevance_weight: float = 100.0
    fusion_weight: float = 0.0
    fusion_k: float = 60.0
    heading_weight: float = 0.0
    file_weight: float = 0.0
    length_weight: float = 0.0
    gate: RelevanceGate = field(default_factory=RelevanceGate)


def heading_overlap(task: frozenset[str], words: frozenset[str]) -> float:
    """Task words among ``words`` (a heading path's or a file name's stems), at most 3."""
    return float(min(3, len(task & words))) if words else 0.0


def _rrf(candidates: Sequence[Candidate], k: float) -> dict[int, float]:
    """Reciprocal-rank fusion of the relevance, lexical and similarity rankings, each
    scaled so that first place is worth 1 (a candidate absent from a ranking gets 0)."""
    fused = dict.fromkeys((c.item_id for c in candidates), 0.0)
    by_relevance = sorted(candidates, key=lambda c: (-c.relevance, c.item_id))
    by_semantic = sorted(
        (c for c in candidates if c.semantic > 0), key=lambda c: (-c.semantic, c.item_id)
    )
    by_lexical = sorted(
        (c for c in candidates if c.lexical_rank is not None),
        key=lambda c: (c.lexical_rank, c.item_id),
    )
    for ranking in (by_relevance, by_semantic, by_lexical):
        for rank, candidate in enumerate(ranking):
            fused[candidate.item_id] += (k + 1) / (k + rank + 1)
    return fused


def rank_candidates(
    candidates: Sequence[Candidate], params: RankParams | None = None
) -> tuple[list[tuple[float, int]], int]:
    """Gate the candidates on relevance, then order the kept ones.

    Returns:
        ((score, item id) best first, how many were left out as not relevant enough).
    """
    params = params or RankParams()
    by_relevance = sorted(candidates, key=lambda c: (-c.relevance, -c.total, c.item_id))
    keep = params.gate.cut([c.relevance for c in by_relevance])
    kept = by_relevance[:keep]
    fused = _rrf(kept, params.fusion_k) if params.fusion_weight else {}
    scored = [
        (
            round(
                params.relevance_weight * c.relevance
                + c.total
                + params.fusion_weight * fused.get(c.item_id, 0.0)
                + params.heading_weight * c.heading
                + params.file_weight * c.file
                - params.length_weight * c.tokens / 10,
                4,
            ),
            c.semantic,
            c.item_id,
        )
        for c in kept
    ]
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    return [(score, item_id) for score, _, item_id in scored], len(candidates) - keep
