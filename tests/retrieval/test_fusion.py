from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.models import ScoredId
from memory_core.retrieval.fusion import fuse, normalise_scores, rrf, weighted


def hits(*pairs: tuple[int, float]) -> list[ScoredId]:
    return [ScoredId(i, s) for i, s in pairs]


def test_rrf_sums_reciprocal_ranks_across_arms() -> None:
    fused = rrf({"a": hits((1, 9), (2, 8)), "b": hits((2, 0.9), (3, 0.1))}, k=60)
    scores = {f.item_id: f.score for f in fused}
    assert scores[2] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[1] == pytest.approx(1 / 61)
    assert [f.item_id for f in fused] == [2, 1, 3]
    assert fused[0].arms["a"].rank == 2 and fused[0].arms["b"].rank == 1


def test_rrf_weights_scale_each_arm() -> None:
    fused = rrf({"a": hits((1, 1)), "b": hits((2, 1))}, k=60, weights={"a": 2.0, "b": 1.0})
    assert [f.item_id for f in fused] == [1, 2]


def test_rrf_ties_break_by_item_id() -> None:
    fused = rrf({"a": hits((7, 1)), "b": hits((3, 1))})
    assert [f.item_id for f in fused] == [3, 7]


def test_weighted_respects_score_direction() -> None:
    # bm25: more negative is better, so item 1 (-5) beats item 2 (-1).
    fused = weighted({"lex": hits((1, -5.0), (2, -1.0))}, higher_is_better={"lex": False})
    assert [f.item_id for f in fused] == [1, 2]
    assert fused[0].score == pytest.approx(1.0) and fused[1].score == pytest.approx(0.0)


def test_weighted_item_missing_from_an_arm_scores_zero_there() -> None:
    fused = weighted(
        {"a": hits((1, 1.0), (2, 0.0)), "b": hits((2, 1.0), (3, 0.5))}, weights={"a": 1, "b": 3}
    )
    scores = {f.item_id: f.score for f in fused}
    assert scores == pytest.approx({1: 1.0, 2: 3.0, 3: 0.0})


def test_normalise_equal_scores_are_all_best() -> None:
    assert normalise_scores([2.0, 2.0]) == [1.0, 1.0]
    assert normalise_scores([]) == []
    assert normalise_scores([1.0, 2.0], method="max") == [0.5, 1.0]


def test_fuse_rejects_unknown_method_and_negative_weights() -> None:
    with pytest.raises(ValueError):
        fuse({}, method="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        rrf({"a": []}, weights={"a": -1})
    with pytest.raises(ValueError):
        rrf({"a": []}, k=0)


arm = st.lists(st.tuples(st.integers(0, 30), st.floats(-50, 50, allow_nan=False)), max_size=25).map(
    lambda pairs: [ScoredId(i, s) for i, s in pairs]
)


@given(arm, arm, st.sampled_from(["rrf", "weighted"]))
def test_fusion_is_deterministic_unique_and_a_subset(
    a: list[ScoredId], b: list[ScoredId], method: str
) -> None:
    arms = {"lexical": a, "semantic": b}
    first = fuse(arms, method=method, higher_is_better={"lexical": False})  # type: ignore[arg-type]
    second = fuse(
        dict(reversed(list(arms.items()))), method=method, higher_is_better={"lexical": False}
    )  # type: ignore[arg-type]
    ids = [f.item_id for f in first]
    assert ids == [f.item_id for f in second]
    assert len(ids) == len(set(ids))
    assert set(ids) == {h.item_id for h in a} | {h.item_id for h in b}
    assert all(first[i].score >= first[i + 1].score for i in range(len(first) - 1))
