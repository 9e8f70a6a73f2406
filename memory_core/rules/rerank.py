"""The ranking stage of ``query_directives``: gate, then order the candidates (pure).

Each candidate arrives with the seed-003 total (severity, layer, ...), its task relevance
(:func:`~memory_core.rules.relevance.relevance`), its cosine similarity, its rank in the
lexical arm and its severity. The order is a linear score in seed-003 points:

    total + relevance_weight × relevance
    + Σ over three rankings (relevance, similarity, lexical) of weight × k / (k + rank)
    + must_bonus (MUST directives)

The second line is memoir's relevance fused with the hybrid baselines' reciprocal-rank
fusion rather than replacing it: a directive both near the task and matching its words ranks
above one that is only very near. The weights are a logistic fit of "this candidate matches a
label of the task" on the public dev set (``bench/rules_eval/tune_rank.py``); fitted leave one
repository out, each fold's weights were within ±20 % of these, and the held-out recall is
what ``bench/rules_eval/RESULTS.md`` reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_core.rules.relevance import RelevanceGate

__all__ = ["Candidate", "RankParams", "rank_candidates"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate directive as the ranking stage sees it.

    Attributes:
        item_id: the directive's item id (ties are broken by it).
        total: the seed-003 weighted total.
        relevance: task relevance (similarity units, 0..~1.5).
        semantic: cosine similarity with the task (0 when unavailable).
        lexical_rank: 0-based rank in the lexical arm, or None when it did not match.
        must: the directive is a MUST.
    """

    item_id: int
    total: float
    relevance: float
    semantic: float = 0.0
    lexical_rank: int | None = None
    must: bool = False


@dataclass(frozen=True)
class RankParams:
    """Weights of the order (see the module docstring), in seed-003 points.

    ``RankParams(relevance_weight=100, fusion_relevance=0, fusion_semantic=0,
    fusion_lexical=0, must_bonus=0)`` is the order before the fusion (relevance first,
    the seed-003 total breaking near-ties).
    """

    relevance_weight: float = 40.0
    fusion_relevance: float = 38.0
    fusion_semantic: float = 38.0
    fusion_lexical: float = 20.0
    fusion_k: float = 10.0
    must_bonus: float = 16.0
    gate: RelevanceGate = field(default_factory=RelevanceGate)


def _fusion(candidates: Sequence[Candidate], params: RankParams) -> dict[int, float]:
    """Weighted reciprocal-rank fusion of the relevance, similarity and lexical rankings;
    first place in a ranking is worth its weight, a candidate absent from one gets 0."""
    k = params.fusion_k
    fused = dict.fromkeys((c.item_id for c in candidates), 0.0)
    rankings = (
        (params.fusion_relevance, sorted(candidates, key=lambda c: (-c.relevance, c.item_id))),
        (
            params.fusion_semantic,
            sorted(
                (c for c in candidates if c.semantic > 0), key=lambda c: (-c.semantic, c.item_id)
            ),
        ),
        (
            params.fusion_lexical,
            sorted(
                (c for c in candidates if c.lexical_rank is not None),
                key=lambda c: (c.lexical_rank, c.item_id),
            ),
        ),
    )
    for weight, ranking in rankings:
        if weight:
            for rank, candidate in enumerate(ranking):
                fused[candidate.item_id] += weight * k / (k + rank)
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
    fused = _fusion(kept, params)
    scored = [
        (
            round(
                c.total
                + params.relevance_weight * c.relevance
                + fused[c.item_id]
                + (params.must_bonus if c.must else 0.0),
                4,
            ),
            c.semantic,
            c.item_id,
        )
        for c in kept
    ]
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    return [(score, item_id) for score, _, item_id in scored], len(candidates) - keep
