"""The offline tree's pure parts: clustering level by level, and names from the text's words."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from memory_core.hierarchy.clustering import TreeNode, TreeShape, build_tree, silhouette
from memory_core.hierarchy.labels import GENERIC_WORDS, name_path, name_tree
from memory_core.llm.keyphrases import STOPWORDS

from .conftest import DATA

FOUR_TOPICS = [
    json.loads(line)
    for line in (DATA / "stackexchange_four_topics.jsonl").read_text("utf-8").splitlines()
]


def blobs(groups: int, per_group: int, *, spread: float = 0.15, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(groups, 48))
    return np.vstack(
        [c + spread * rng.normal(size=(per_group, 48)) * np.linalg.norm(c) for c in centres]
    )


def level_of(shape: TreeShape, level: int) -> list[int]:
    return [shape.path(leaf)[level - 1] for leaf in shape.leaf_of]


def test_well_separated_groups_become_the_level_1_categories() -> None:
    vectors = blobs(4, 10)
    shape = build_tree(vectors, depth=3, max_categories=40, leaf_capacity=20)
    top = level_of(shape, 1)
    assert len(set(top)) == 4
    for group in range(4):  # each group sits whole in one level-1 category
        assert len(set(top[group * 10 : (group + 1) * 10])) == 1
    assert all(shape.nodes[leaf].level == 3 for leaf in shape.leaf_of)
    assert [n.level for n in shape.nodes] == sorted(n.level for n in shape.nodes)  # parents first


def test_a_node_too_large_for_one_query_is_split_even_without_structure() -> None:
    vectors = np.random.default_rng(5).normal(size=(64, 32))  # no clusters at all
    assert (
        len(set(build_tree(vectors, depth=3, max_categories=128, leaf_capacity=1000).leaf_of)) <= 2
    )
    shape = build_tree(vectors, depth=3, max_categories=128, leaf_capacity=8)
    sizes = [len(shape.nodes[leaf].members) for leaf in set(shape.leaf_of)]
    assert len(sizes) >= 8 and sum(sizes) == 64


@pytest.mark.parametrize("cap", [3, 5, 9, 20])
def test_the_tree_never_exceeds_the_category_cap(cap: int) -> None:
    shape = build_tree(blobs(6, 12), depth=3, max_categories=cap, leaf_capacity=2)
    assert len(shape.nodes) <= cap
    assert all(shape.nodes[leaf].level == 3 for leaf in shape.leaf_of)
    assert sorted(i for leaf in set(shape.leaf_of) for i in shape.nodes[leaf].members) == list(
        range(72)
    )


def test_a_cap_below_the_depth_is_refused() -> None:
    with pytest.raises(ValueError, match="depth 3"):
        build_tree(blobs(2, 4), depth=3, max_categories=2, leaf_capacity=4)


def test_clustering_is_deterministic() -> None:
    vectors = blobs(5, 9, spread=0.4)
    first = build_tree(vectors, depth=3, max_categories=60, leaf_capacity=4)
    assert build_tree(vectors, depth=3, max_categories=60, leaf_capacity=4) == first


def naive_silhouette(unit: np.ndarray, labels: np.ndarray) -> float:
    """Rousseeuw's definition, point by point (the reference)."""
    scores = []
    for i in range(len(unit)):
        distance = 1 - unit @ unit[i]
        own = labels == labels[i]
        if own.sum() == 1:
            scores.append(0.0)
            continue
        a = distance[own].sum() / (own.sum() - 1)
        b = min(distance[labels == c].mean() for c in set(labels.tolist()) - {labels[i]})
        scores.append((b - a) / max(a, b))
    return float(np.mean(scores))


def test_silhouette_matches_its_definition_and_is_zero_for_one_group() -> None:
    vectors = blobs(3, 7, spread=0.6)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    labels = np.array([0] * 7 + [1] * 7 + [2] * 6 + [0])  # one point in the wrong group
    assert silhouette(unit, labels) == pytest.approx(naive_silhouette(unit, labels), abs=1e-9)
    assert silhouette(unit, np.repeat([0, 1, 2], 7)) > silhouette(unit, labels)
    assert silhouette(unit, np.zeros(21, dtype=int)) == 0.0


def _site_shape() -> tuple[TreeShape, list[str]]:
    """Four level-1 nodes (the four sites), each with one child and one leaf."""
    texts = [r["answer"] for r in FOUR_TOPICS]
    sites = sorted({r["site"] for r in FOUR_TOPICS})
    nodes: list[TreeNode] = []
    leaf_of = [0] * len(texts)
    for site in sites:
        members = tuple(i for i, r in enumerate(FOUR_TOPICS) if r["site"] == site)
        nodes.append(TreeNode(1, None, members))
    for top in range(len(sites)):
        nodes.append(TreeNode(2, top, nodes[top].members))
    for middle in range(len(sites), 2 * len(sites)):
        nodes.append(TreeNode(3, middle, nodes[middle].members))
        for i in nodes[middle].members:
            leaf_of[i] = len(nodes) - 1
    return TreeShape(tuple(nodes), tuple(leaf_of)), texts


def test_names_are_the_texts_own_words_never_generic_and_never_repeated() -> None:
    shape, texts = _site_shape()
    names = name_tree(shape, texts)
    for index, (node, name) in enumerate(zip(shape.nodes, names, strict=True)):
        body = " ".join(texts[i] for i in node.members).casefold()
        words = re.findall(r"[^\W\d_]+", name.casefold())
        assert words and all(w in body for w in words), name  # written in its own chunks
        assert not set(words) & (GENERIC_WORDS | STOPWORDS), name
        above = {w for a in shape.path(index)[:-1] for w in names[a].casefold().split()}
        assert not set(words) & above, (name, above)  # a child says something new
    tops = [n for n, node in zip(names, shape.nodes, strict=True) if node.level == 1]
    assert len({t.casefold() for t in tops}) == len(tops)
    assert any("beer" in t.casefold() for t in tops)
    assert any("quantum" in t.casefold() or "qubit" in t.casefold() for t in tops)


def test_a_lone_new_chunk_is_named_from_its_distinctive_words() -> None:
    others = [r["answer"] for r in FOUR_TOPICS if "beer" not in r["site"]]
    text = next(r["answer"] for r in FOUR_TOPICS if "beer" in r["site"])
    names = name_path(text, others, 3, exclude=["Citra"], avoid=[])
    assert len(names) == 3 and len({n.casefold() for n in names}) == 3
    assert names[0] != "Citra"
    assert all(w in text.casefold() for n in names for w in n.casefold().split())
