"""Splitting the aggregate into M contiguous parts; hostile text through the whole path."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.errors import BudgetError
from memory_core.hierarchy.aggregate import collect_within_budget, part_count, split_parts
from memory_core.hierarchy.store import Category, HierarchyChunk
from memory_core.hierarchy.traverse import SelectedPath
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


class ListStore:
    """The read side of a hierarchy store over in-memory lists (a fake at the I/O seam)."""

    def __init__(self, leaves: list[list[int]]) -> None:
        self.rows: dict[int, list[HierarchyChunk]] = {}
        self.reads = 0
        for leaf, counts in enumerate(leaves):
            self.rows[leaf] = [
                HierarchyChunk(
                    leaf * 1000 + i, f"{leaf:03d}-{i:03d}", leaf, "t", n, f"h{leaf}-{i}", "2026"
                )
                for i, n in enumerate(counts)
            ]

    async def chunks_in_category(
        self,
        scope: str,
        category_id: int,
        *,
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[HierarchyChunk]:
        rows = [r for r in self.rows[category_id] if after is None or (r.created_at, r.uid) > after]
        self.reads += min(limit, len(rows))
        return rows[:limit]


def leaf_path(leaf: int) -> SelectedPath:
    return SelectedPath((Category(leaf, "s", None, 1, f"L{leaf}", "2026"),), (leaf,))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(st.integers(min_value=1, max_value=400), max_size=8), min_size=1, max_size=5),
    st.integers(min_value=1, max_value=3000),
)
def test_budget_packing_takes_the_longest_fitting_prefix(
    leaves: list[list[int]], budget: int
) -> None:
    store = ListStore(leaves)
    paths = [leaf_path(i) for i in range(len(leaves))]
    collected = anyio.run(collect_within_budget, store, "s", paths, budget)  # type: ignore[arg-type]
    ordered = [(leaf, n) for leaf, counts in enumerate(leaves) for n in counts]
    prefix, total = 0, 0
    while prefix < len(ordered) and total + ordered[prefix][1] <= budget:
        total += ordered[prefix][1]
        prefix += 1
    assert collected.total_tokens == total <= budget
    assert len(collected.candidates) == prefix
    if prefix < len(ordered):
        stop_leaf = ordered[prefix][0]
        # The leaf being read is dropped too when none of its chunks fit (issue 13).
        taken_from_stop_leaf = sum(1 for leaf, _ in ordered[:prefix] if leaf == stop_leaf)
        first = stop_leaf + (1 if taken_from_stop_leaf else 0)
        assert collected.dropped_paths == [f"L{i}" for i in range(first, len(leaves))]
        assert collected.stopped_tokens == ordered[prefix][1]
        # Reads stop exactly at the boundary: the rows used and the one that did not fit.
        assert store.reads == prefix + 1
    else:
        assert collected.dropped_paths == [] and collected.stopped_at is None
