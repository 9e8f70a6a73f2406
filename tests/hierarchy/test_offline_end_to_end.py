"""The offline model end to end on a real public-domain text, with the real local embedder.

No key, no network: Chapter I of *Alice's Adventures in Wonderland* (tests/data/SOURCES.md) is
chunked, classified into a three-level tree by the offline model, and questions are answered
extractively with citations.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.service import Memoir

from .conftest import DATA

pytestmark = pytest.mark.anyio

BOOK = DATA / "alice_chapter1.txt"


@pytest.fixture
async def alice(tmp_path: Path) -> AsyncIterator[Memoir]:
    memoir = await Memoir.open(
        f"sqlite:///{tmp_path}/alice.db",
        settings=load_settings(cwd=tmp_path, environ={}),
        embedder=create_embedder("local"),
    )
    result = await memoir.hierarchy.ingest_file(BOOK, scope="book")
    assert result.ok, result.error
    yield memoir
    await memoir.close()


async def test_the_chapter_is_filed_into_a_valid_tree_and_answers_cite_it(alice: Memoir) -> None:
    text = BOOK.read_text(encoding="utf-8")
    tree = await alice.hierarchy.categories(scope="book")
    assert 3 <= tree.total <= 128
    leaves: list[int] = []

    def walk(nodes: list, level: int) -> None:
        for node in nodes:
            assert node.level == level
            if level == 3:
                leaves.append(node.chunk_count or 0)
                assert node.children == []
            else:
                assert node.children, "every non-leaf category has a path down to a leaf"
                walk(node.children, level + 1)

    walk(tree.nodes, 1)
    assert sum(leaves) >= 6  # every chunk sits under a leaf

    bottle = await alice.query(
        "What was written on the label of the little bottle?", scope="book", strategy="wide_branch"
    )
    assert bottle.ok and "DRINK ME" in (bottle.answer or "")
    assert bottle.model_used["answer"] == ["memoir-offline"]
    cited = {c.chunk_id for c in bottle.citations}
    assert any("DRINK ME" in c.text_content for c in bottle.used_chunks if c.chunk_id in cited)
    assert all(c.text_content in text for c in bottle.used_chunks)

    cake = await alice.query("What words were marked on the cake?", scope="book")
    assert cake.ok and "EAT ME" in (cake.answer or "")
    assert cake.strategy == "one_shot" and len(cake.explored_paths) == 1

    # Same question, same store: the same answer (deterministic mode).
    again = await alice.query("What words were marked on the cake?", scope="book")
    assert again.answer == cake.answer
    assert [c.chunk_id for c in again.used_chunks] == [c.chunk_id for c in cake.used_chunks]
