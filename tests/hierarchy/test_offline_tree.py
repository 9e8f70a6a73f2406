"""The knowledge tree with no key, end to end: issue 13's four-topic corpus, made of real text.

24 accepted answers from four Stack Exchange sites (``tests/data/SOURCES.md``) are saved one
ingest call at a time with the real local embedder; the tree must separate the topics, name
them from their own words, and answer without repeating itself. Then the agent as classifier.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memory_core.embed import create_embedder
from memory_core.errors import ConfigError, InvalidInputError
from memory_core.hierarchy.labels import GENERIC_WORDS
from memory_core.scope import Scope
from memory_core.service import Memoir

from .conftest import DATA, make_settings, open_memoir

pytestmark = pytest.mark.anyio

RECORDS = [
    json.loads(line)
    for line in (DATA / "stackexchange_four_topics.jsonl").read_text("utf-8").splitlines()
]
FALLBACK_NAMES = {"General", "Other", "Miscellaneous"}
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n\s*\n")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


async def open_local(tmp_path: Path, **hierarchy: Any) -> Memoir:
    return await Memoir.open(
        f"sqlite:///{tmp_path}/local.db",
        settings=make_settings(tmp_path, **hierarchy),
        embedder=create_embedder("local"),
    )


async def paths_of(memoir: Memoir, scope: str, uids: list[str]) -> dict[str, list[str]]:
    """Each chunk's category path, read back from the store (after any re-clustering)."""
    store = await memoir.hierarchy.store()
    categories = {c.category_id: c for c in await store.all_categories(Scope.of(scope))}
    where = await store.existing_chunks(Scope.of(scope), uids)
    out = {}
    for uid in uids:
        names, node = [], categories.get(where[uid][1])
        while node is not None:
            names.append(node.name)
            node = categories.get(node.parent_id) if node.parent_id else None
        out[uid] = names[::-1]
    return out


def walk(nodes: list[Any]) -> list[Any]:
    return [n for node in nodes for n in (node, *walk(node.children))]


@pytest.fixture
async def four_topics(tmp_path: Path) -> AsyncIterator[tuple[Memoir, dict[str, int]]]:
    memoir = await open_local(tmp_path)
    order = list(range(len(RECORDS)))
    random.Random(3).shuffle(order)  # the topics arrive interleaved, one note at a time
    owner: dict[str, int] = {}
    for index in order:
        result = await memoir.ingest_text(RECORDS[index]["answer"], scope="notes")
        assert result.ok and result.model_used == {"classify": ["memoir-offline:clusters"]}
        owner.update({c.chunk_id: index for c in result.chunks})
    yield memoir, owner
    await memoir.close()


async def test_four_unrelated_topics_get_their_own_categories_named_from_their_words(
    four_topics: tuple[Memoir, dict[str, int]],
) -> None:
    memoir, owner = four_topics
    paths = await paths_of(memoir, "notes", list(owner))
    # Each level-2 category holds one topic (related topics may share a level-1 parent).
    by_level2: dict[str, Counter[str]] = {}
    for uid, path in paths.items():
        by_level2.setdefault(" / ".join(path[:2]), Counter())[RECORDS[owner[uid]]["site"]] += 1
    purity = sum(c.most_common(1)[0][1] for c in by_level2.values()) / len(paths)
    assert purity >= 0.9, by_level2
    assert len({path[0] for path in paths.values()}) >= 2  # not one path for everything
    assert len({" / ".join(p) for p in paths.values()}) >= 4
    # Names are words of the chunks they hold, never glued fragments or generic words.
    tree = await memoir.hierarchy.categories(scope="notes")
    corpus = " ".join(r["answer"] for r in RECORDS).casefold()
    for node in walk(tree.nodes):
        if node.name in FALLBACK_NAMES:  # a leaf with no word left that its parent lacks
            continue
        words = re.findall(r"[^\W\d_]+", node.name.casefold())
        assert 1 <= len(words) <= 2, node.name
        assert all(w in corpus for w in words) and not set(words) & GENERIC_WORDS, node.name
        assert node.level == tree.depth or node.children  # no empty branch is left behind
        assert node.level != tree.depth or (node.chunk_count or 0) >= 1


async def test_answers_come_from_the_right_answer_and_never_repeat_a_sentence(
    four_topics: tuple[Memoir, dict[str, int]],
) -> None:
    memoir, _ = four_topics
    right = 0
    for record in RECORDS:
        result = await memoir.query(record["title"], scope="notes")
        assert result.ok
        said = sentences(result.answer or "")
        assert said and len(said) == len(set(said))
        right += any(s in set(sentences(record["answer"])) for s in said)
    assert right >= 16  # 21 of 24 when written; the old name-matching tree answered far fewer


async def test_a_24_paragraph_text_is_no_longer_filed_under_one_path(tmp_path: Path) -> None:
    memoir = await open_local(tmp_path)
    try:
        text = "\n\n".join(r["answer"] for r in RECORDS)
        result = await memoir.ingest_text(text, scope="doc")
        assert result.ok and len(result.chunks) >= 20
        paths = {c.category_path for c in result.chunks}
        assert len({p.split(" / ")[0] for p in paths}) >= 2 and len(paths) >= 4
    finally:
        await memoir.close()


async def test_the_tree_is_reclustered_as_the_store_grows(tmp_path: Path) -> None:
    memoir = await open_local(tmp_path)
    try:
        beer = [r for r in RECORDS if r["site"].startswith("beer")]
        quantum = [r for r in RECORDS if r["site"].startswith("quantum")]
        uids: list[str] = []
        for record in beer:
            uids += [
                c.chunk_id for c in (await memoir.ingest_text(record["answer"], scope="s")).chunks
            ]
        before = await paths_of(memoir, "s", list(uids))
        for record in quantum:
            result = await memoir.ingest_text(record["answer"], scope="s")
            uids += [c.chunk_id for c in result.chunks]
        after = await memoir.hierarchy.categories(scope="s")
        paths = await paths_of(memoir, "s", uids)
        assert len(paths) == len(set(uids))  # every chunk kept (relinked, not copied)
        beer_uids = list(before)
        assert {" / ".join(paths[u]) for u in beer_uids} != {" / ".join(p) for p in before.values()}
        # The grown tree keeps the two topics apart from level 1 down.
        beer_tops = {paths[u][0] for u in beer_uids}
        quantum_tops = {paths[u][0] for u in uids if u not in before}
        assert not beer_tops & quantum_tops
        nodes = walk(after.nodes)
        assert after.total == len(nodes)
        assert all(n.children or (n.chunk_count or 0) > 0 for n in nodes)  # nothing left empty
        runs = await memoir.hierarchy.runs(scope="s", kind="hierarchy_tree")
        assert runs and all(r["payload"]["managed"] for r in runs)
    finally:
        await memoir.close()


async def test_the_cap_holds_while_the_tree_grows(tmp_path: Path) -> None:
    memoir = await open_local(tmp_path, max_categories=9)
    try:
        for record in RECORDS:
            assert (await memoir.ingest_text(record["answer"], scope="s")).ok
        assert (await memoir.hierarchy.categories(scope="s")).total <= 9
    finally:
        await memoir.close()


async def test_the_name_matching_classifier_is_one_setting_away(tmp_path: Path) -> None:
    memoir = await open_memoir(tmp_path, make_settings(tmp_path, offline_classifier="names"))
    try:
        result = await memoir.ingest_text("Owls hunt mice at night.", scope="s")
        assert result.model_used == {"classify": ["memoir-offline"]}
        assert await memoir.hierarchy.runs(scope="s", kind="hierarchy_tree") == []
    finally:
        await memoir.close()


# -- the calling agent as the classifier -------------------------------------------------------


async def test_an_agent_path_is_used_as_given_and_the_tree_is_then_left_as_curated(
    tmp_path: Path,
) -> None:
    memoir = await open_memoir(tmp_path)
    try:
        first = await memoir.ingest_text(
            "B-tree indexes speed up lookups.", scope="s", category="Databases / Indexing"
        )
        assert first.model_used == {"classify": ["agent-proposed"]} and first.llm_calls == 0
        path = first.chunks[0].category_path
        assert path.startswith("Databases / Indexing / ")  # the last level from the text
        assert first.categories_created[:2] == ["Databases", "Databases / Indexing"]
        full = await memoir.ingest_text(
            "Sourdough needs a long proof.", scope="s", category=["Cooking", "Bread", "Proofing"]
        )
        assert full.chunks[0].category_path == "Cooking / Bread / Proofing"
        # Offline ingests join the curated tree; its names are never re-clustered away.
        for n in range(6):
            await memoir.ingest_text(f"Note {n} about hash indexes and rye bread.", scope="s")
        names = {n.name for n in walk((await memoir.hierarchy.categories(scope="s")).nodes)}
        assert {"Databases", "Indexing", "Cooking", "Bread", "Proofing"} <= names
    finally:
        await memoir.close()


async def test_a_proposed_name_matches_the_existing_category_and_says_so(tmp_path: Path) -> None:
    memoir = await open_memoir(tmp_path)
    try:
        await memoir.ingest_text("B-tree indexes.", scope="s", category="Databases / Indexing")
        again = await memoir.ingest_text(
            "Partial indexes.", scope="s", category="database / indexes"
        )
        assert again.chunks[0].category_path.startswith("Databases / Indexing / ")
        assert again.categories_created == []
        assert "category 'database' matched the existing 'Databases'" in again.warnings
        wider = await memoir.ingest_text("GiST indexes.", scope="s", category="Indexing")
        assert wider.chunks[0].category_path.startswith("Indexing / ")  # level 1 is its own
    finally:
        await memoir.close()


async def test_a_bad_proposed_path_is_refused_with_the_fix(tmp_path: Path) -> None:
    memoir = await open_memoir(tmp_path, make_settings(tmp_path, max_categories=4))
    try:
        with pytest.raises(InvalidInputError, match="has 4 levels; this tree has 3") as deep:
            await memoir.ingest_text("x", scope="s", category="A / B / C / D")
        assert "at most 3 names" in (deep.value.hint or "")
        with pytest.raises(InvalidInputError, match="empty name"):
            await memoir.ingest_text("x", scope="s", category="A //")
        await memoir.ingest_text("Owls.", scope="s", category="Birds / Owls / Barn")
        with pytest.raises(InvalidInputError, match="holds 3 of its 4 categories") as full:
            await memoir.ingest_text("Roses.", scope="s", category="Plants")
        assert "'Birds'" in (full.value.hint or "")  # the categories to choose from
        assert (await memoir.hierarchy.categories(scope="s")).total == 3  # nothing half-made
    finally:
        await memoir.close()


async def test_recluster_rebuilds_a_curated_tree_from_its_content(tmp_path: Path) -> None:
    memoir = await open_local(tmp_path)
    try:
        for record in RECORDS[:12]:
            await memoir.ingest_text(record["answer"], scope="s", category="Inbox")
        tree = await memoir.hierarchy.recluster(scope="s")
        assert [n.name for n in tree.nodes] != ["Inbox"] and len(walk(tree.nodes)) >= 3
        runs = await memoir.hierarchy.runs(scope="s", kind="hierarchy_tree")
        assert runs[0]["payload"] == {**runs[0]["payload"], "managed": True, "reason": "requested"}
    finally:
        await memoir.close()


async def test_changing_the_depth_of_a_filled_store_is_refused_until_rebuilt(
    tmp_path: Path,
) -> None:
    memoir = await open_memoir(tmp_path)
    await memoir.ingest_text("Owls hunt mice at night.", scope="birds")
    await memoir.close()
    deeper = await open_memoir(tmp_path, make_settings(tmp_path, depth=4))
    try:
        for attempt in (
            deeper.ingest_text("Herons fish at dawn.", scope="birds"),
            deeper.query("what do owls hunt?", scope="birds"),
        ):
            with pytest.raises(ConfigError, match=r"hierarchy\.depth is 4") as refused:
                await attempt
            assert "'birds'" in refused.value.message and "depth 3" in refused.value.message
            assert "hierarchy.depth = 3" in (refused.value.hint or "")
            assert "memoir categories --recluster --scope 'birds'" in (refused.value.hint or "")
        assert (await deeper.hierarchy.categories(scope="birds")).total == 3  # still readable
        rebuilt = await deeper.hierarchy.recluster(scope="birds")
        assert {n.level for n in walk(rebuilt.nodes)} == {1, 2, 3, 4}
        answer = await deeper.query("what do owls hunt?", scope="birds")
        assert answer.ok and "mice" in (answer.answer or "")
    finally:
        await deeper.close()
