"""The ranking stage (``memory_core/rules/rerank.py``) on small handmade candidates.

Each behaviour adopted from the dev-set fit is pinned here on inputs written for the test:
memoir's relevance fused with the rank fusion of its three rankings (not replaced by it), a
bounded preference for MUST directives, and the relevance gate in front of the order.
"""

from __future__ import annotations

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
