"""Benchmark the rules knowledge graph: ingest rate, detect_context and query_directives latency.

    .venv/bin/python bench/bench_rules.py [--quick]

Generates synthetic template rule documents (500 rules / 2,000 directives, and 100k directives
unless --quick), then measures, each against a baseline run in the same process:

- ingest rate with the local embedding model (baseline: embedding the same texts alone);
- detect_context p95, uncached (baseline: the parser's bare keyword scan of the same task);
- query_directives p95 end to end, sequential and with 10 concurrent calls (baseline: the raw
  FTS5 + vec0 store searches the ranker starts from);
- query_directives p95 at 100k directives (hash embedder for the ingest, to keep it minutes).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.retrieval.fts import fts_terms  # noqa: E402
from memory_core.rules.service import RulesService  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402
from memory_core.storage.ports import LexicalQuery  # noqa: E402
from rules_parser.inference import match_keywords  # noqa: E402
from rules_parser.vocabulary import LAYER_KEYWORDS, TOPIC_KEYWORDS  # noqa: E402

LAYERS = [layer for layer in LAYER_KEYWORDS if layer != "*"] + ["*"]
TOPICS = list(TOPIC_KEYWORDS)
VERBS = [
    "Validate",
    "Log",
    "Cache",
    "Test",
    "Document",
    "Version",
    "Encrypt",
    "Batch",
    "Retry",
    "Paginate",
    "Index",
    "Review",
    "Measure",
    "Isolate",
    "Name",
    "Type",
]
OBJECTS = [
    "request bodies",
    "database queries",
    "user sessions",
    "API responses",
    "migrations",
    "React components",
    "background jobs",
    "feature flags",
    "error messages",
    "secrets",
    "container images",
    "domain events",
    "integration tests",
    "cache entries",
    "webhooks",
    "audit logs",
    "payment flows",
    "search indexes",
    "config files",
    "CLI commands",
]
QUALIFIERS = [
    "before every release",
    "at the service boundary",
    "with bounded retries",
    "in the repository layer",
    "behind a feature flag",
    "with structured fields",
    "for every public function",
    "using the platform library",
    "in one transaction",
    "with a timeout",
    "per tenant",
    "with property-based tests",
]


def rule_document(index: int, directives: int, rng: random.Random) -> str:
    layer = LAYERS[index % len(LAYERS)]
    topics = rng.sample(TOPICS, 3)
    lines = [
        f"# Rule: Synthetic rule {index} on {topics[0]}",
        "",
        f"**Layer:** {layer}",
        f"**AuthoritativeFor:** {topics[0]}-{index % 50}, {topics[0]}",
        f"**Topics:** {', '.join(topics)}",
        "**Severity:** SHOULD",
        "",
        "## When to Apply",
        f"- Changing {rng.choice(OBJECTS)} {rng.choice(QUALIFIERS)}",
        f"- Adding {rng.choice(OBJECTS)}",
        "",
        "## Directives",
        "",
    ]
    for d in range(directives):
        severity = ("MUST", "SHOULD", "MAY")[(index + d) % 3]
        statement = (
            f"{rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(QUALIFIERS)} ({index}.{d})"
        )
        lines += [
            f"### [{severity}] {statement}",
            f"Applies to {rng.choice(OBJECTS)} and {rng.choice(OBJECTS)}.",
            "",
            f"**Rationale:** keeps {topics[d % 3]} predictable.",
            "",
        ]
    return "\n".join(lines) + "\n"


def write_corpus(folder: Path, rules: int, per_rule: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(rules):
        (folder / f"rule-{index:05d}.md").write_text(rule_document(index, per_rule, rng))
    return rules * per_rule


def tasks(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(['Add', 'Fix', 'Refactor', 'Speed up', 'Secure'])} the "
        f"{rng.choice(OBJECTS)} {rng.choice(QUALIFIERS)} for task {i}"
        for i in range(count)
    ]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000


def line(name: str, value: float, unit: str, baseline: float, base_name: str) -> None:
    ratio = value / baseline if baseline else float("nan")
    print(
        f"{name:<44} {value:>10.2f} {unit:<6} baseline {base_name} {baseline:.2f} {unit} "
        f"-> ratio {ratio:.2f}x"
    )


async def open_store(folder: Path, spec: str) -> Memoir:
    settings = load_settings(cwd=folder, environ={"MEMOIR_RULES__DETECTION_CACHE_TTL_S": "0"})
    memoir = await Memoir.open(
        f"sqlite:///{folder / 'bench.db'}", settings=settings, embedder=create_embedder(spec)
    )
    await memoir.embedder.ensure_loaded()
    return memoir


async def bench_2000(work: Path, n_tasks: int) -> None:
    corpus = work / "rules2k"
    total = write_corpus(corpus, 500, 4)
    memoir = await open_store(work, "local")
    service = RulesService(memoir.context, cwd=work)
    try:
        # Baseline: the embedding work alone, on exactly the texts the ingest embeds.
        from memory_core.rules.graph import build_plan
        from memory_core.rules.topics import TopicNormalizer
        from memory_core.scope import Scope
        from rules_parser import load

        texts = []
        for path in sorted(corpus.glob("*.md")):
            document = load(path).document
            assert document is not None
            plan = build_plan(
                document,
                scope=Scope.of("x"),
                uri=path.name,
                tokens=memoir.tokens,
                topics=TopicNormalizer(),
            )
            texts += [d.embed_text for d in plan.directives]
        start = time.perf_counter()
        await memoir.embedder.embed_documents(texts)
        embed_rate = len(texts) / (time.perf_counter() - start)
        start = time.perf_counter()
        report = await service.upsert_markdown([str(corpus)], scope="b")
        ingest_rate = report.directives_added / (time.perf_counter() - start)
        assert report.directives_added == total, report.directives_added
        print(f"corpus: 500 rules, {total} directives")
        line("ingest (parse+graph+embed+write)", ingest_rate, "dir/s", embed_rate, "embed-only")

        queries = tasks(n_tasks)
        await service.query_directives(queries[0], scope="b")  # build the index once
        base_detect, detect = [], []
        for task in queries:
            start = time.perf_counter()
            match_keywords(task, LAYER_KEYWORDS)
            match_keywords(task, TOPIC_KEYWORDS)
            base_detect.append((time.perf_counter() - start) * 1000)
            detect.append(await timed(lambda t=task: service.detect_context(t, scope="b")))
        line("detect_context p95 (uncached)", p95(detect), "ms", p95(base_detect), "keyword-scan")

        raw, full = [], []
        for task in queries:

            async def raw_search(t: str = task) -> None:
                vec = await memoir.embedder.embed_query(t)
                query = LexicalQuery(tuple(fts_terms(t)), "OR")
                key = Scope.of("b")

                def run(tx: Any) -> None:
                    if query.terms:
                        tx.lexical.search(query, key, kinds=("directive",), limit=30)
                    tx.vectors.search(vec, key, kinds=("directive",), k=30)

                await memoir.store.read(run)

            raw.append(await timed(raw_search))
            full.append(await timed(lambda t=task: service.query_directives(t, scope="b")))
        line("query_directives p95 @2k", p95(full), "ms", p95(raw), "raw-fts+knn")
        line(
            "query_directives p50 @2k",
            statistics.median(full),
            "ms",
            statistics.median(raw),
            "raw-fts+knn",
        )

        concurrent: list[float] = []

        async def one(t: str) -> None:
            concurrent.append(await timed(lambda: service.query_directives(t, scope="b")))

        for start_index in range(0, len(queries), 10):
            async with anyio.create_task_group() as group:
                for task in queries[start_index : start_index + 10]:
                    group.start_soon(one, task)
        line(
            "query_directives p95 @2k, 10 concurrent",
            p95(concurrent),
            "ms",
            p95(full),
            "sequential",
        )
        # "Without degradation" (Req 10.5): 10 concurrent calls finish as fast as 10 in a row.
        batch = queries[:10]
        start = time.perf_counter()
        for task in batch:
            await service.query_directives(task, scope="b")
        sequential_wall = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for task in batch:
                group.start_soon(one, task)
        concurrent_wall = (time.perf_counter() - start) * 1000
        line(
            "10 queries, concurrent wall time",
            concurrent_wall,
            "ms",
            sequential_wall,
            "10-in-a-row",
        )
    finally:
        await service.close()  # writes the query runs still queued
        await memoir.close()


async def bench_100k(work: Path, n_tasks: int) -> None:
    corpus = work / "rules100k"
    total = write_corpus(corpus, 5000, 20, seed=3)
    (work / "big").mkdir()
    memoir = await open_store(work / "big", "hash:384")
    service = RulesService(memoir.context, cwd=work)
    try:
        start = time.perf_counter()
        report = await service.upsert_markdown([str(corpus)], scope="big")
        took = time.perf_counter() - start
        print(
            f"corpus: 5000 rules, {report.directives_added} directives (of {total}), "
            f"ingested with hash:384 in {took:.1f} s ({report.directives_added / took:.0f} dir/s)"
        )
        queries = tasks(n_tasks, seed=5)
        start = time.perf_counter()
        await service.query_directives(queries[0], scope="big")
        print(
            f"{'first query (builds the in-memory index)':<44} "
            f"{(time.perf_counter() - start) * 1000:>10.2f} ms"
        )
        raw, full = [], []
        for task in queries:

            async def raw_search(t: str = task) -> None:
                vec = await memoir.embedder.embed_query(t)
                query = LexicalQuery(tuple(fts_terms(t)), "OR")
                key = Scope.of("big")

                def run(tx: Any) -> None:
                    if query.terms:
                        tx.lexical.search(query, key, kinds=("directive",), limit=30)
                    tx.vectors.search(vec, key, kinds=("directive",), k=30)

                await memoir.store.read(run)

            raw.append(await timed(raw_search))
            full.append(await timed(lambda t=task: service.query_directives(t, scope="big")))
        line("query_directives p95 @100k", p95(full), "ms", p95(raw), "raw-fts+knn")
        line(
            "query_directives p50 @100k",
            statistics.median(full),
            "ms",
            statistics.median(raw),
            "raw-fts+knn",
        )
    finally:
        await service.close()  # writes the query runs still queued
        await memoir.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2k directives only, fewer queries")
    args = parser.parse_args()
    n_tasks = 50 if args.quick else 200
    with tempfile.TemporaryDirectory(prefix="bench_rules_") as tmp:
        work = Path(tmp)
        anyio.run(bench_2000, work, n_tasks)
        if not args.quick:
            anyio.run(bench_100k, work, 100)


if __name__ == "__main__":
    main()
