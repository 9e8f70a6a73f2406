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
from typing import NamedTuple

import numpy as np

from memory_core.rules.relevance import RelevanceGate
from memory_core.rules.rounding import round4

__all__ = ["Candidate", "RankParams", "rank_candidates", "rank_columns"]


class Candidate(NamedTuple):
    """One candidate directive as the ranking stage sees it (a named tuple: a query builds
    one per candidate, ~235 at 2k directives, and a tuple is made 4x faster than a frozen
    dataclass).

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


def _columns(
    candidates: Sequence[Candidate],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(item ids, totals, relevances, similarities, lexical ranks (-1: none), MUST flags)."""
    ids, totals, relevances, similarities, lexical_ranks, musts = zip(*candidates, strict=True)
    return (
        np.array(ids, dtype=np.int64),
        np.array(totals, dtype=np.float64),
        np.array(relevances, dtype=np.float64),
        np.array(similarities, dtype=np.float64),
        np.array([-1 if r is None else r for r in lexical_ranks], dtype=np.int64),
        np.array(musts, dtype=bool),
    )


def _fused(
    ids: np.ndarray,
    relevances: np.ndarray,
    similarities: np.ndarray,
    lexical_ranks: np.ndarray,
    params: RankParams,
) -> np.ndarray:
    """Weighted reciprocal-rank fusion of the relevance, similarity and lexical rankings,
    per candidate; first place in a ranking is worth its weight, a candidate absent from one
    gets 0. Same floating-point operations, in the same order, as a loop over the rankings
    (``np.lexsort`` is stable and its last key is the primary one)."""
    k = params.fusion_k
    fused = np.zeros(len(ids))
    rankings = (
        (params.fusion_relevance, np.arange(len(ids)), -relevances),
        (params.fusion_semantic, np.flatnonzero(similarities > 0), -similarities),
        (params.fusion_lexical, np.flatnonzero(lexical_ranks >= 0), lexical_ranks),
    )
    for weight, members, key in rankings:
        if weight:
            ranking = members[np.lexsort((ids[members], key[members]))]
            fused[ranking] += weight * k / (k + np.arange(len(ranking)))
    return fused


def _fusion(candidates: Sequence[Candidate], params: RankParams) -> dict[int, float]:
    """:func:`_fused` by item id (``bench/rules_eval/tune_rank.py`` reads the features)."""
    if not candidates:
        return {}
    ids, _, relevances, similarities, lexical_ranks, _ = _columns(candidates)
    fused = _fused(ids, relevances, similarities, lexical_ranks, params)
    return dict(zip(ids.tolist(), fused.tolist(), strict=True))


def rank_candidates(
    candidates: Sequence[Candidate], params: RankParams | None = None
) -> tuple[list[tuple[float, int]], int]:
    """Gate the candidates on relevance, then order the kept ones.

    The arithmetic runs on numpy columns (~235 candidates a query at 2k directives); the
    final rounding is Python's ``round`` (or :func:`~memory_core.rules.signal_columns.round4`,
    the same to the bit), as before, so scores are unchanged to the bit.

    Returns:
        ((score, item id) best first, how many were left out as not relevant enough).
    """
    if not candidates:
        return [], 0
    return rank_columns(*_columns(candidates), params)


def rank_columns(
    ids: np.ndarray,
    totals: np.ndarray,
    relevances: np.ndarray,
    similarities: np.ndarray,
    lexical_ranks: np.ndarray,
    musts: np.ndarray,
    params: RankParams | None = None,
) -> tuple[list[tuple[float, int]], int]:
    """:func:`rank_candidates` on its columns (item ids, totals, relevances, similarities,
    lexical ranks with -1 for none, MUST flags), for a caller that already has them."""
    params = params or RankParams()
    if not len(ids):
        return [], 0
    columns = (ids, totals, relevances, similarities, lexical_ranks, musts)
    by_relevance = np.lexsort((ids, -totals, -relevances))
    keep = params.gate.cut(relevances[by_relevance].tolist())
    kept = by_relevance[:keep]
    ids, totals, relevances, similarities, lexical_ranks, musts = (c[kept] for c in columns)
    fused = _fused(ids, relevances, similarities, lexical_ranks, params)
    raw = (
        totals
        + params.relevance_weight * relevances
        + fused
        + np.where(musts, params.must_bonus, 0.0)
    )
    scores = round4(raw)
    order = np.lexsort((ids, -similarities, -scores))
    return list(zip(scores[order].tolist(), ids[order].tolist(), strict=True)), len(
        columns[0]
    ) - keep
