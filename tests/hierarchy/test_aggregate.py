"""Splitting the aggregate into M contiguous parts; hostile text through the whole path."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.errors import BudgetError
from memory_core.hierarchy.aggregate import part_count, split_parts
from memory_core.service import Memoir
from memory_core.tokens import create_token_counter

from .conftest import Script

TOKENS = create_token_counter("tiktoken:o200k_base")


def test_m_is_the_ceiling_of_total_over_budget() -> None:
    assert part_count(1000, 300) == 4
    assert part_count(900, 300) == 3
    assert part_count(0, 300) == 1
    with pytest.raises(BudgetError):
        part_count(10, 0)


def test_parts_follow_chunk_boundaries_and_balance_tokens() -> None:
    texts = [f"Chunk {i} " + "word " * 50 for i in range(9)]
    parts = split_parts(texts, 3, TOKENS)
    assert parts == ["\n\n".join(texts[0:3]), "\n\n".join(texts[3:6]), "\n\n".join(texts[6:9])]


def test_a_chunk_larger_than_a_part_is_cut_at_sentence_ends() -> None:
    big = " ".join(f"Sentence number {i} is here." for i in range(60))
    parts = split_parts([big], 4, TOKENS)
    assert len(parts) == 4
    assert " ".join(parts).split() == big.split()
    assert max(TOKENS.count(p) for p in parts) <= TOKENS.count(big) // 4 + 12


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.text(alphabet=st.sampled_from("ab. "), min_size=1, max_size=200), max_size=12),
    st.integers(min_value=1, max_value=8),
)
def test_parts_are_contiguous_and_lose_nothing(texts: list[str], parts: int) -> None:
    out = split_parts(texts, parts, TOKENS)
    assert len(out) <= max(1, parts)
    assert "".join("".join(out).split()) == "".join("".join(texts).split())


@pytest.mark.anyio
async def test_sql_and_quote_characters_are_stored_and_read_verbatim(memoir: Memoir) -> None:
    hostile = 'Robert\'); DROP TABLE item;-- said "hi" % _ \\ and left.'

    def name_it(context: dict[str, Any]) -> dict[str, Any]:
        return {"category": f"x'); DROP TABLE category;-- {context['level']}", "is_new": True}

    ingested = await memoir.ingest_text(hostile, scope="s", model=Script(classify=name_it).model)
    assert ingested.ok
    tree = await memoir.hierarchy.categories(scope="s")
    assert tree.nodes[0].name == "x'); DROP TABLE category;-- 1"
    answered = await memoir.query("Who left?", scope="s")
    assert answered.ok and answered.used_chunks[0].text_content == hostile
