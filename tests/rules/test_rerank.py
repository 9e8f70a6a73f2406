"""The ranking stage (``memory_core/rules/rerank.py``) on small handmade candidates.

Each behaviour adopted from the dev-set fit is pinned here on inputs written for the test:
memoir's relevance fused with the rank fusion of its three rankings (not replaced by it), a
bounded preference for MUST directives, and the relevance gate in front of the order.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from memory_core.rules.relevance import RelevanceGate
from memory_core.rules.rerank import Candidate, RankParams, rank_candidates

# The order before the fusion: relevance first, the seed-003 total breaking near-ties.
RELEVANCE_ONLY = RankParams(
    relevance_weight=100.0,
    fusion_relevance=0.0,
    fusion_semantic=0.0,
    fusion_lexical=0.0,
    must_bonus=0.0,
)


def _order(candidates: list[Candidate], params: RankParams | None = None) -> list[int]:
    scored, _ = rank_candidates(candidates, params)
    return [item_id for _, item_id in scored]


def test_a_directive_that_also_matches_the_task_words_outranks_a_slightly_nearer_one() -> None:
    # 1 is a little nearer the task; 2 is almost as near and is the lexical arm's best hit.
    near = Candidate(item_id=1, total=14.0, relevance=0.50, semantic=0.50)
    both = Candidate(item_id=2, total=14.0, relevance=0.46, semantic=0.46, lexical_rank=0)
    assert _order([near, both]) == [2, 1]
    # Relevance alone (the order before the fusion) put the nearer one first.
    assert _order([near, both], RELEVANCE_ONLY) == [1, 2]


def test_relevance_still_counts_next_to_the_fusion() -> None:
    # Same ranks in every ranking: a large relevance gap decides, not the ranks alone.
    first = Candidate(item_id=1, total=8.0, relevance=0.90, semantic=0.60, lexical_rank=0)
    second = Candidate(item_id=2, total=8.0, relevance=0.30, semantic=0.30, lexical_rank=1)
    scored, _ = rank_candidates([first, second])
    (top, _), (runner_up, _) = scored
    # More than the fusion's own difference between first and second place.
    fusion_gap = sum((38.0, 38.0, 20.0)) * (1 - 10 / 11)
    assert top - runner_up > fusion_gap + 40.0 * 0.5


def test_a_must_wins_a_near_tie_but_not_a_clear_relevance_gap() -> None:
    should = Candidate(item_id=1, total=8.0, relevance=0.42, semantic=0.42, lexical_rank=0)
    must = Candidate(
        item_id=2, total=12.0, relevance=0.40, semantic=0.40, lexical_rank=1, must=True
    )
    assert _order([should, must]) == [2, 1]
    far_must = Candidate(item_id=3, total=12.0, relevance=0.15, semantic=0.15, must=True)
    near_should = Candidate(item_id=4, total=8.0, relevance=0.95, semantic=0.90, lexical_rank=0)
    assert _order([far_must, near_should]) == [4, 3]


def test_the_relevance_gate_runs_before_the_order_and_counts_what_it_left_out() -> None:
    gate = RelevanceGate(floor=0.3, ratio=0.0, keep_at_least=1)
    params = RankParams(gate=gate)
    candidates = [
        Candidate(item_id=1, total=8.0, relevance=0.6, semantic=0.6),
        Candidate(item_id=2, total=12.0, relevance=0.2, semantic=0.2, lexical_rank=0, must=True),
        Candidate(item_id=3, total=8.0, relevance=0.35, semantic=0.35),
    ]
    scored, left_out = rank_candidates(candidates, params)
    assert [item_id for _, item_id in scored] == [1, 3]
    assert left_out == 1


def test_without_similarity_or_lexical_hits_only_those_rankings_are_empty() -> None:
    # The embedder is still loading: no similarity; the relevance ranking and the lexical
    # arm still order the candidates, and ties break by item id.
    a = Candidate(item_id=5, total=8.0, relevance=0.45, lexical_rank=1)
    b = Candidate(item_id=4, total=8.0, relevance=0.45, lexical_rank=0)
    c = Candidate(item_id=6, total=8.0, relevance=0.20)
    assert _order([a, b, c]) == [4, 5, 6]


def _loop_ranking(
    candidates: Sequence[Candidate], params: RankParams
) -> tuple[list[tuple[float, int]], int]:
    """The ranking stage as a plain loop over the candidates (what ``rank_candidates`` did
    before it ran on numpy columns): the reference its scores and order must equal."""
    by_relevance = sorted(candidates, key=lambda c: (-c.relevance, -c.total, c.item_id))
    keep = params.gate.cut([c.relevance for c in by_relevance])
    kept = by_relevance[:keep]
    k = params.fusion_k
    fused = dict.fromkeys((c.item_id for c in kept), 0.0)
    rankings = (
        (params.fusion_relevance, sorted(kept, key=lambda c: (-c.relevance, c.item_id))),
        (
            params.fusion_semantic,
            sorted((c for c in kept if c.semantic > 0), key=lambda c: (-c.semantic, c.item_id)),
        ),
        (
            params.fusion_lexical,
            sorted(
                (c for c in kept if c.lexical_rank is not None),
                key=lambda c: (c.lexical_rank, c.item_id),
            ),
        ),
    )
    for weight, ranking in rankings:
        if weight:
            for rank, candidate in enumerate(ranking):
                fused[candidate.item_id] += weight * k / (k + rank)
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


# Few distinct values, so ties in every key (relevance, total, similarity, rank) are common.
_values = st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.3333, 0.5, 0.9, 1.2])
_candidate_lists = st.lists(
    st.builds(
        Candidate,
        item_id=st.integers(1, 10_000),
        total=st.sampled_from([0.0, 8.0, 12.5, 14.0, 21.3333]),
        relevance=_values,
        semantic=_values,
        lexical_rank=st.none() | st.integers(0, 60),
        must=st.booleans(),
    ),
    max_size=40,
    unique_by=lambda c: c.item_id,
)


@given(
    _candidate_lists,
    st.sampled_from([RankParams(), RELEVANCE_ONLY, RankParams(gate=RelevanceGate(0.3, 0.5, 1))]),
)
def test_the_ranking_equals_the_plain_loop_to_the_bit_ties_included(
    candidates: list[Candidate], params: RankParams
) -> None:
    assert rank_candidates(candidates, params) == _loop_ranking(candidates, params)
