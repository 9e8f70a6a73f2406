"""How good is the knowledge tree with no key? Measured on a public corpus with known topics.

Run: ``.venv/bin/python bench/bench_knowledge_tree.py [--quick] [--per-site N] [--batch]``

Corpus: ``bench/data/stackexchange_topics.jsonl`` (five Stack Exchange sites, 40 questions each,
CC BY-SA 3.0; see ``bench/data/SOURCES.md``). The site is the known topic. Every accepted answer
is saved with its own ``ingest_text`` call (as an agent saves notes one at a time), in a shuffled
order that interleaves the topics; then every question title is asked with ``query``.

Both offline classifiers run on the same corpus in the same run:

- ``names`` (the baseline, memoir's offline model before issue 13): one offline "LLM" call per
  level, reusing the existing category whose *name* is most similar to the chunk, else naming a
  new one from the chunk's most frequent words;
- ``clusters`` (the default): chunk embeddings clustered level by level, names from the
  clusters' distinctive words (class-based TF-IDF), the tree re-clustered as the store grows.

Figures, for each: purity and adjusted Rand index (ARI) of the level-1 categories, of the
level-2 categories and of the leaves against the sites (a tree may separate the topics at
level 1, or group related ones there and separate them at level 2); the number of categories; answer accuracy: the share of questions
whose answer quotes the question's own accepted answer (``answer from its document``) and whose
answer comes from the right site (``answer on topic``); answers that repeat a sentence; ingest
and query time.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from math import comb
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pydantic_ai.models

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.scope import Scope
from memory_core.service import Memoir
from server.logging_setup import configure_logging

CORPUS = Path(__file__).parent / "data" / "stackexchange_topics.jsonl"
CLASSIFIERS = ("names", "clusters")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n\s*\n")


def load_corpus(per_site: int) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    kept: Counter[str] = Counter()
    out = []
    for record in records:
        if kept[record["site"]] < per_site:
            kept[record["site"]] += 1
            out.append(record)
    return out


# -- clustering metrics ------------------------------------------------------------------------


def purity(labels: list[str], clusters: list[str]) -> float:
    """Share of items in the majority class of their cluster."""
    by_cluster: dict[str, Counter[str]] = {}
    for label, cluster in zip(labels, clusters, strict=True):
        by_cluster.setdefault(cluster, Counter())[label] += 1
    return sum(c.most_common(1)[0][1] for c in by_cluster.values()) / len(labels)


def adjusted_rand_index(labels: list[str], clusters: list[str]) -> float:
    """Hubert and Arabie's ARI: 1 for identical partitions, about 0 for random ones."""
    table: Counter[tuple[str, str]] = Counter(zip(labels, clusters, strict=True))
    rows: Counter[str] = Counter(labels)
    cols: Counter[str] = Counter(clusters)
    n = len(labels)
    index = sum(comb(v, 2) for v in table.values())
    row_sum = sum(comb(v, 2) for v in rows.values())
    col_sum = sum(comb(v, 2) for v in cols.values())
    expected = row_sum * col_sum / comb(n, 2)
    maximum = (row_sum + col_sum) / 2
    return 1.0 if maximum == expected else (index - expected) / (maximum - expected)


# -- one run -----------------------------------------------------------------------------------


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


async def run(
    classifier: str, records: list[dict[str, Any]], folder: Path, batch: bool
) -> dict[str, Any]:
    settings = load_settings(
        {"hierarchy": {"offline_classifier": classifier}}, cwd=folder, environ={}
    )
    memoir = await Memoir.open(
        f"sqlite:///{folder}/{classifier}.db", settings=settings, embedder=create_embedder("local")
    )
    try:
        await memoir.embedder.ensure_loaded()
        order = list(range(len(records)))
        random.Random(13).shuffle(order)
        chunk_of: dict[str, int] = {}  # chunk uid -> record index
        started = time.perf_counter()
        if batch:
            text = "\n\n".join(records[i]["answer"] for i in order)
            result = await memoir.ingest_text(text, scope="bench", source="corpus")
            assert result.ok, result.error
            spans = []
            offset = 0
            for i in order:
                spans.append((offset, offset + len(records[i]["answer"]), i))
                offset += len(records[i]["answer"]) + 2
            for chunk in result.chunks:
                middle = (chunk.start_offset + chunk.end_offset) // 2
                chunk_of[chunk.chunk_id] = next(i for s, e, i in spans if s <= middle <= e + 2)
        else:
            for i in order:
                result = await memoir.ingest_text(
                    records[i]["answer"], scope="bench", source=records[i]["url"]
                )
                assert result.ok, result.error
                for chunk in result.chunks:
                    chunk_of[chunk.chunk_id] = i
        ingest_s = time.perf_counter() - started

        store = await memoir.hierarchy.store()
        categories = {c.category_id: c for c in await store.all_categories(Scope.of("bench"))}
        where = await store.existing_chunks(Scope.of("bench"), list(chunk_of))

        def path_of(category_id: int) -> list[str]:
            names = []
            node = categories.get(category_id)
            while node is not None:
                names.append(node.name)
                node = categories.get(node.parent_id) if node.parent_id else None
            return names[::-1]

        labels, top, second, leaves = [], [], [], []
        for uid, index in chunk_of.items():
            path = path_of(where[uid][1])
            labels.append(records[index]["site"])
            top.append(path[0])
            second.append(" / ".join(path[:2]))
            leaves.append(" / ".join(path))

        right_doc = on_topic = repeats = 0
        latencies = []
        for index, record in enumerate(records):
            started = time.perf_counter()
            answer = await memoir.query(record["title"], scope="bench")
            latencies.append(time.perf_counter() - started)
            said = sentences(answer.answer or "") if answer.ok else []
            if len(said) != len(set(said)):
                repeats += 1
            own = set(sentences(record["answer"]))
            if any(s in own for s in said):
                right_doc += 1
            sites = {
                records[chunk_of[c.chunk_id]]["site"]
                for c in answer.citations
                if c.chunk_id in chunk_of
            }
            if sites == {record["site"]}:
                on_topic += 1
            del index
        n = len(records)
        return {
            "chunks": len(labels),
            "categories": len(categories),
            "level1": len(set(top)),
            "leaves": len(set(leaves)),
            "level2": len(set(second)),
            "purity_l1": purity(labels, top),
            "ari_l1": adjusted_rand_index(labels, top),
            "purity_l2": purity(labels, second),
            "ari_l2": adjusted_rand_index(labels, second),
            "purity_leaf": purity(labels, leaves),
            "ari_leaf": adjusted_rand_index(labels, leaves),
            "right_doc": right_doc / n,
            "on_topic": on_topic / n,
            "repeats": repeats,
            "ingest_s": ingest_s,
            "query_ms": statistics.median(latencies) * 1000,
            "tree": await memoir.hierarchy.categories(scope="bench"),
        }
    finally:
        await memoir.close()


def tree_lines(nodes: list[Any], indent: str = "    ") -> list[str]:
    lines = []
    for node in nodes:
        count = f" ({node.chunk_count})" if node.chunk_count else ""
        lines.append(f"{indent}{node.name}{count}")
        lines.extend(tree_lines(node.children, indent + "  "))
    return lines


async def main(per_site: int, batch: bool, show_tree: bool) -> None:
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False  # the offline model only
    configure_logging("error", "console")
    records = load_corpus(per_site)
    sites = sorted({r["site"] for r in records})
    mode = "one text" if batch else "one ingest call per answer"
    print(
        f"knowledge tree bench: {len(records)} answers from {len(sites)} Stack Exchange sites "
        f"({mode}), local MiniLM embedder, offline model, SQLite"
    )
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for classifier in CLASSIFIERS:
            results[classifier] = await run(classifier, records, Path(tmp), batch)
    rows = [
        ("chunks", "chunks", "{:.0f}"),
        ("categories (cap 128)", "categories", "{:.0f}"),
        ("level-1 categories (5 topics)", "level1", "{:.0f}"),
        ("level-2 categories", "level2", "{:.0f}"),
        ("leaves", "leaves", "{:.0f}"),
        ("purity, level 1", "purity_l1", "{:.3f}"),
        ("ARI, level 1", "ari_l1", "{:.3f}"),
        ("purity, level 2", "purity_l2", "{:.3f}"),
        ("ARI, level 2", "ari_l2", "{:.3f}"),
        ("purity, leaves", "purity_leaf", "{:.3f}"),
        ("ARI, leaves", "ari_leaf", "{:.3f}"),
        ("answer from its document", "right_doc", "{:.3f}"),
        ("answer on topic", "on_topic", "{:.3f}"),
        ("answers repeating a sentence", "repeats", "{:.0f}"),
        ("ingest seconds", "ingest_s", "{:.1f}"),
        ("query ms (median)", "query_ms", "{:.1f}"),
    ]
    base, new = results["names"], results["clusters"]
    print(f"\n  {'figure':<32} {'names (old)':>12} {'clusters':>12} {'ratio':>8}")
    for label, key, fmt in rows:
        ratio = new[key] / base[key] if base[key] else float("nan")
        print(f"  {label:<32} {fmt.format(base[key]):>12} {fmt.format(new[key]):>12} {ratio:>8.2f}")
    if show_tree:
        for classifier in CLASSIFIERS:
            print(f"\n  tree ({classifier}):")
            print("\n".join(tree_lines(results[classifier]["tree"].nodes)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="12 answers per site instead of 40")
    parser.add_argument("--per-site", type=int, default=None)
    parser.add_argument("--batch", action="store_true", help="ingest the corpus as one text")
    parser.add_argument("--tree", action="store_true", help="print both trees")
    args = parser.parse_args()
    per_site = args.per_site or (12 if args.quick else 40)
    anyio.run(main, per_site, args.batch, args.tree)
