"""Removing ingested knowledge: by chunk id, by source, by category; rows, vectors and counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import InvalidInputError
from memory_core.hierarchy.port_tree import _all_chunks
from memory_core.scope import Scope
from memory_core.service import Memoir
from memory_core.storage.ports import LexicalQuery

from .conftest import make_settings, open_memoir
from .test_hierarchy_cli import memoir as cli
from .test_ingest_stream import topic_text

pytestmark = pytest.mark.anyio
SCOPE = "s"


async def _state(memoir: Memoir) -> tuple[int, int, int, int]:
    """(chunks, vectors, lexical hits for a word of every text, chunks the tree counts)."""
    key = Scope.of(SCOPE)

    def read(tx: Any) -> tuple[int, int, int]:
        items = _all_chunks(tx, key)
        vectors = tx.vectors.vectors([i.item_id for i in items] + list(range(1, 5000)))
        hits = tx.lexical.search(LexicalQuery(("number",), "AND"), key, limit=5000)
        return len(items), len(vectors), len(hits)

    chunks, vectors, lexical = await memoir.store.read(read)
    tree = await memoir.hierarchy.categories(scope=SCOPE)
    counted = sum(_counts(tree.model_dump()["nodes"]))
    return chunks, vectors, lexical, counted


def _counts(nodes: list[dict[str, Any]]) -> list[int]:
    out: list[int] = []
    for node in nodes:
        out.extend([node["chunk_count"]] if node["chunk_count"] else [])
        out.extend(_counts(node["children"]))
    return out


async def test_forget_by_id_source_and_category_removes_rows_vectors_and_counts(
    tmp_path: Path,
) -> None:
    memoir = await open_memoir(tmp_path, make_settings(tmp_path, ingest_batch_bytes=8192))
    try:
        first = await memoir.hierarchy.ingest_text(
            topic_text(30_000, seed=1).replace("item", "number"), scope=SCOPE, source="a.md"
        )
        await memoir.hierarchy.ingest_text(
            "Our deploys run number one on Fridays after the freeze. " * 30,
            scope=SCOPE,
            source="b.md",
            category="Ops / Deploys / Fridays",
        )
        chunks, vectors, lexical, counted = await _state(memoir)
        assert chunks == vectors == lexical == counted > 10
        store = await memoir.hierarchy.store()
        await store.create_category(Scope.of(SCOPE), parent_id=None, level=1, name="Kept empty")

        one = first.chunks[0].chunk_id
        removed = await memoir.hierarchy.forget(scope=SCOPE, chunk_ids=[one])
        assert removed.chunks == 1
        assert await _state(memoir) == (chunks - 1,) * 4

        by_category = await memoir.hierarchy.forget(scope=SCOPE, category="Ops")
        assert by_category.chunks >= 1 and by_category.categories == 3  # Ops / Deploys / Fridays
        tree = await memoir.hierarchy.categories(scope=SCOPE)
        assert "Ops" not in [n.name for n in tree.nodes]
        left = chunks - 1 - by_category.chunks
        assert await _state(memoir) == (left,) * 4

        by_source = await memoir.hierarchy.forget(scope=SCOPE, source="a.md")
        assert by_source.chunks == left and by_source.sources == 1
        assert await _state(memoir) == (0, 0, 0, 0)
        left_tree = await memoir.hierarchy.categories(scope=SCOPE)
        assert [n.name for n in left_tree.nodes] == ["Kept empty"]  # untouched: not dropped

        # The input can be ingested again afterwards (its resume record went with it).
        again = await memoir.hierarchy.ingest_text(
            topic_text(30_000, seed=1).replace("item", "number"), scope=SCOPE, source="a.md"
        )
        assert again.stream is not None and again.stream.new_chunks == by_source.chunks + 1
    finally:
        await memoir.close()


async def test_forget_needs_a_target_and_names_unknown_categories(memoir: Memoir) -> None:
    with pytest.raises(InvalidInputError, match="nothing to forget"):
        await memoir.hierarchy.forget(scope=SCOPE)
    with pytest.raises(InvalidInputError, match="no category 'Nope'"):
        await memoir.hierarchy.forget(scope=SCOPE, category="Nope")


def test_cli_rm_removes_knowledge_by_source_and_category(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(topic_text(20_000, seed=2), encoding="utf-8")
    assert cli("ingest", str(notes), "--scope", SCOPE, cwd=tmp_path).returncode == 0
    filed = cli(
        "ingest", "--text", "Backups run nightly at 02:30.", "--scope", SCOPE,
        "--category", "Ops / Backups / Nightly", cwd=tmp_path,
    )  # fmt: skip
    assert filed.returncode == 0, filed.stderr

    gone = cli("rm", "--category", "Ops / Backups", "--scope", SCOPE, "--json", cwd=tmp_path)
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["forget"]["chunks"] == 1

    gone = cli("rm", "--source", str(notes), "--scope", SCOPE, "--json", cwd=tmp_path)
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["forget"]["chunks"] >= 10
    tree = json.loads(cli("categories", "--scope", SCOPE, "--json", cwd=tmp_path).stdout)
    assert tree["categories"]["total"] == 0

    both = cli("rm", "doc1", "--source", "x", cwd=tmp_path)
    assert both.returncode != 0 and "--source" in both.stderr
