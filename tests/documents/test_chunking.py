from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.chunking import chunk_by_tokens as chunk_text
from memory_core.tokens import create_token_counter

COUNTER = create_token_counter("tiktoken:o200k_base")


def words(text: str) -> int:
    return len(text.split())


def test_chunks_are_exact_slices_within_the_token_limit() -> None:
    text = " ".join(f"word{i}" for i in range(1000))
    chunks = chunk_text(text, chunk_tokens=50, overlap_tokens=10, count=COUNTER.count)
    assert len(chunks) > 5
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.tokens == COUNTER.count(chunk.text) <= 50
    # Consecutive chunks overlap, and the last one reaches the end.
    assert all(b.start < a.end for a, b in itertools.pairwise(chunks))
    assert chunks[-1].end == len(text)


def test_boundaries_are_stable_for_the_same_text() -> None:
    text = "alpha beta gamma. " * 300
    first = chunk_text(text, chunk_tokens=40, overlap_tokens=8, count=COUNTER.count)
    second = chunk_text(text, chunk_tokens=40, overlap_tokens=8, count=COUNTER.count)
    assert first == second


def test_a_word_longer_than_a_chunk_is_cut() -> None:
    text = "x" * 5000 + " tail"
    chunks = chunk_text(text, chunk_tokens=20, overlap_tokens=0, count=COUNTER.count)
    assert all(c.tokens <= 20 for c in chunks)
    assert "".join(c.text for c in chunks) == text


def test_empty_text_has_no_chunks() -> None:
    assert chunk_text("   \n", chunk_tokens=20, overlap_tokens=2, count=COUNTER.count) == []


@settings(max_examples=80, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab c\n\t.é"), max_size=600),
    st.integers(1, 40),
    st.integers(0, 20),
)
def test_every_non_space_character_is_covered_and_limits_hold(
    text: str, size: int, overlap: int
) -> None:
    chunks = chunk_text(text, chunk_tokens=size, overlap_tokens=overlap, count=words)
    covered = set()
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.tokens <= size
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, c in enumerate(text) if not c.isspace())
