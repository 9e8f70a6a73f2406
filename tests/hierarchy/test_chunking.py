"""Chunking (memoirAI Requirements 2 and 7): limits, paragraph boundaries, short and long text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.chunking import chunk_by_sentences as _chunk_by_sentences
from memory_core.errors import InvalidInputError
from memory_core.tokens import create_token_counter

from .conftest import DATA

_COUNT = create_token_counter("chars4").count


def chunk_text(text: str, **kwargs: object):  # type: ignore[no-untyped-def]
    return _chunk_by_sentences(text, count=_COUNT, **kwargs)  # type: ignore[arg-type]


def paragraph(words: int, seed: str) -> str:
    return " ".join(f"{seed}{i}." if i % 12 == 11 else f"{seed}{i}" for i in range(words)) + "."


def test_chunks_are_exact_slices_within_max_and_in_order() -> None:
    text = (DATA / "alice_chapter1.txt").read_text(encoding="utf-8")
    result = chunk_text(text, min_chars=1000, max_chars=2000)
    assert len(result.chunks) >= 5
    previous_end = 0
    for chunk in result.chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert len(chunk.text) <= 2000
        assert chunk.start >= previous_end
        previous_end = chunk.end
    # All but the last reach the minimum.
    assert all(len(c.text) >= 1000 for c in result.chunks[:-1])


def test_paragraph_boundaries_are_kept_when_lengths_allow() -> None:
    paragraphs = [paragraph(60, f"p{i}w") for i in range(8)]  # ~400-500 chars each
    text = "\n\n".join(paragraphs)
    result = chunk_text(text, min_chars=1000, max_chars=2000)
    for chunk in result.chunks:
        # Each chunk starts at a paragraph start and ends at a paragraph end.
        assert any(chunk.text.startswith(p[:10]) for p in paragraphs)
        assert any(chunk.text.endswith(p[-10:]) for p in paragraphs)


def test_short_text_is_kept_as_one_chunk_with_a_warning() -> None:
    result = chunk_text("A short note. Only two sentences.", min_chars=1000, max_chars=2000)
    assert [c.text for c in result.chunks] == ["A short note. Only two sentences."]
    assert any("below the minimum" in w for w in result.warnings)


def test_long_text_without_delimiters_is_split_not_refused() -> None:
    text = "word " * 2000  # 10,000 characters, no period, no newline
    result = chunk_text(text, min_chars=1000, max_chars=2000)
    assert len(result.chunks) >= 5
    assert all(len(c.text) <= 2000 for c in result.chunks)
    assert "".join(c.text.replace(" ", "") for c in result.chunks) == text.replace(" ", "")


def test_a_sentence_splits_only_at_configured_delimiters() -> None:
    text = "alpha beta; gamma delta; " * 200
    with_semicolon = chunk_text(text, min_chars=100, max_chars=300, delimiters=(";",))
    assert all(c.text.endswith(";") for c in with_semicolon.chunks[:-1])


def test_inconsistent_limits_are_refused_with_a_hint() -> None:
    with pytest.raises(InvalidInputError) as info:
        chunk_text("text", min_chars=500, max_chars=100)
    assert info.value.hint


@settings(max_examples=60, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab .\n\n"), max_size=3000),
    st.integers(min_value=1, max_value=300),
    st.integers(min_value=0, max_value=300),
)
def test_any_text_chunks_into_ordered_slices_under_max(text: str, low: int, extra: int) -> None:
    high = low + extra
    result = chunk_text(text, min_chars=low, max_chars=max(high, 1))
    previous_end = 0
    for chunk in result.chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert 0 < len(chunk.text) <= max(high, 1)
        assert chunk.start >= previous_end
        previous_end = chunk.end
    # No non-whitespace character is lost.
    kept = "".join(c.text for c in result.chunks)
    assert "".join(kept.split()) == "".join(text.split())
