from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.errors import BudgetError
from memory_core.retrieval.packer import PackCandidate, pack


def count(text: str) -> int:
    return len(text.split())


def truncate(text: str, max_tokens: int) -> str:
    return " ".join(text.split()[:max_tokens])


def cand(chunk_id: str, doc_id: str, words: int) -> PackCandidate:
    text = " ".join(f"{chunk_id}w{i}" for i in range(words))
    return PackCandidate(chunk_id, doc_id, text, words, start=0, end=len(text))


def test_packs_in_rank_order_and_dedupes_chunk_ids() -> None:
    result = pack(
        [cand("a", "d1", 3), cand("a", "d1", 3), cand("b", "d2", 3)],
        budget_tokens=100,
        truncate=truncate,
        count=count,
    )
    assert [c.chunk_id for c in result.chunks] == ["a", "b"]
    assert result.skipped_duplicates == 1
    assert result.used_tokens == 3 + 1 + 3  # one separator token between chunks


def test_diversity_caps_chunks_per_document() -> None:
    result = pack(
        [cand("a", "d1", 2), cand("b", "d1", 2), cand("c", "d2", 2)],
        budget_tokens=100,
        truncate=truncate,
        count=count,
        diversity=1,
    )
    assert [c.chunk_id for c in result.chunks] == ["a", "c"]
    assert result.skipped_diversity == 1


def test_last_chunk_is_prefix_truncated_to_fit() -> None:
    result = pack(
        [cand("a", "d1", 5), cand("b", "d2", 10)], budget_tokens=9, truncate=truncate, count=count
    )
    last = result.chunks[-1]
    assert last.truncated and last.tokens == 3
    assert last.text == "bw0 bw1 bw2"
    assert last.end == last.start + len(last.text)
    assert result.used_tokens == 9


def test_negative_budget_is_an_error() -> None:
    with pytest.raises(BudgetError):
        pack([], budget_tokens=-1, truncate=truncate, count=count)
    with pytest.raises(BudgetError):
        pack([], budget_tokens=1, truncate=truncate, count=count, diversity=-2)


candidates = st.lists(
    st.builds(
        cand,
        st.sampled_from(list("abcdefgh")),
        st.sampled_from(["d1", "d2", "d3"]),
        st.integers(0, 40),
    ),
    max_size=30,
)


@given(candidates, st.integers(0, 200), st.one_of(st.none(), st.integers(0, 3)))
def test_never_exceeds_the_budget_and_is_deterministic(
    items: list[PackCandidate], budget: int, diversity: int | None
) -> None:
    first = pack(items, budget_tokens=budget, truncate=truncate, count=count, diversity=diversity)
    again = pack(items, budget_tokens=budget, truncate=truncate, count=count, diversity=diversity)
    assert first == again
    assert first.used_tokens <= budget
    assert sum(c.tokens for c in first.chunks) + max(0, len(first.chunks) - 1) == first.used_tokens
    assert count(first.text) <= budget
    ids = [c.chunk_id for c in first.chunks]
    assert len(ids) == len(set(ids))
    if diversity:
        for doc in ("d1", "d2", "d3"):
            assert sum(c.doc_id == doc for c in first.chunks) <= diversity
