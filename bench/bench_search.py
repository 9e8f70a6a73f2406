"""Search benchmark: latency of the hybrid engine against raw SQLite, and retrieval quality.

    .venv/bin/python bench/bench_search.py [--quick] [--sizes 10000,100000] [--no-quality]
        [--no-latency] [--quality-embedder local|hash:384]

Latency: a synthetic corpus (Zipf-distributed vocabulary, ~60 words per chunk, 10 chunks per
document, random unit vectors) at each size; 2-term and 5-term queries; lexical, vector and
hybrid, unfiltered and filtered at 10 % and 1 % selectivity; p50 / p95 in ms, each beside the
raw-SQLite baseline run in the same process on the same file (plain FTS5 OR query, plain vec0
KNN, and a naive one-statement hybrid that joins FTS5 matches to vector distances) and the
ratio ours / baseline. Filtered queries are checked to return min(k, matches) results.

Quality: the labelled set in bench/data/sqlite_capi_eval.jsonl (SQLite's public-domain C API
docs: heading -> section) with the real local embedder (or `--quality-embedder hash:384`, the
hashing test embedder of docs/search.md); Recall@1, Recall@10 and MRR@10 for each arm alone and
both fusions, so speed is never bought with recall.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_core.config import SearchSettings, load_settings  # noqa: E402
from memory_core.documents import persistence  # noqa: E402
from memory_core.documents.fel import parse_filter  # noqa: E402
from memory_core.documents.querying import run_search  # noqa: E402
from memory_core.documents.records import CHUNK_KIND, NewDocument  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.models import NewItem, stable_id  # noqa: E402
from memory_core.retrieval.engine import SearchEngine, SearchRequest  # noqa: E402
from memory_core.retrieval.packer import PackCandidate, pack  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402
from memory_core.storage import open_store  # noqa: E402
from memory_core.storage.sqlite.filter_sql import compile_filter  # noqa: E402
from memory_core.tokens import create_token_counter  # noqa: E402

SCOPE = Scope.of("bench")
DIM = 384
K = 10
CHUNKS_PER_DOC = 10
WORDS_PER_CHUNK = 60
VOCABULARY = 8000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(words)


def zipf_weights(n: int) -> list[float]:
    return [1.0 / (rank + 1) ** 1.05 for rank in range(n)]


async def build_corpus(memoir: Memoir, chunks: int, rng: random.Random, words: list[str]) -> float:
    """Write ``chunks`` synthetic chunks through the real write path; returns seconds."""
    weights = zipf_weights(len(words))
    docs = chunks // CHUNKS_PER_DOC
    np_rng = np.random.default_rng(7)
    started = time.perf_counter()
    for d in range(docs):
        tags = ["t1", "t10"] if d % 100 == 0 else (["t10"] if d % 10 == 0 else ["all"])
        doc_id = stable_id("bench", d)
        doc = NewDocument(
            doc_id,
            SCOPE,
            f"/corpus/d{d:06d}.md",
            doc_id,
            "2026-01-01T00:00:00+00:00",
            1,
            tuple(tags),
            "bench",
        )
        items = []
        for c in range(CHUNKS_PER_DOC):
            text = " ".join(rng.choices(words, weights, k=WORDS_PER_CHUNK))
            items.append(
                NewItem(
                    uid=stable_id(doc_id, c),
                    kind=CHUNK_KIND,
                    text=text,
                    token_count=WORDS_PER_CHUNK,
                    scope=SCOPE,
                    start_offset=c * 1000,
                    end_offset=c * 1000 + len(text),
                    tags=doc.tags,
                )
            )
        vectors = np_rng.standard_normal((len(items), DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        await memoir.store.write(
            lambda tx, d=doc, i=items, v=vectors: persistence.replace_document(tx, d, i, v)  # type: ignore[misc]
        )
    return time.perf_counter() - started


def make_queries(rng: random.Random, words: list[str], terms: int, n: int) -> list[str]:
    pool = words[30:1500]  # mid-frequency: neither stopword-like nor unseen
    return [" ".join(rng.sample(pool, terms)) for _ in range(n)]


async def timed(fn: Callable[[], Awaitable[Any]], repeats: list[float]) -> Any:
    started = time.perf_counter()
    result = await fn()
    repeats.append((time.perf_counter() - started) * 1000)
    return result


def baseline_sql(
    conn: Any, kind: str, query: str, vector: bytes, flt: tuple[str, tuple[Any, ...]] | None
) -> list[Any]:
    terms = " OR ".join(f'"{t}"' for t in query.split())
    if kind == "lexical":
        if flt is None:
            return conn.execute(
                "SELECT rowid, bm25(item_fts) AS r FROM item_fts WHERE item_fts MATCH ? ORDER BY r LIMIT ?",
                (terms, K),
            ).fetchall()
        return conn.execute(
            "SELECT item.item_id, bm25(item_fts) AS r FROM item_fts JOIN item ON item.item_id = item_fts.rowid "
            f"JOIN resource ON resource.resource_id = item.resource_id WHERE item_fts MATCH ? AND {flt[0]} "
            "ORDER BY r LIMIT ?",
            (terms, *flt[1], K),
        ).fetchall()
    if kind == "vector":
        if flt is None:
            return conn.execute(
                "SELECT item_id, distance FROM item_vec WHERE embedding MATCH ? AND k = ?",
                (vector, K),
            ).fetchall()
        # The plain way to filter a KNN: score every row that passes the filter.
        return conn.execute(
            "SELECT item.item_id, vec_distance_cosine(item_vec.embedding, ?) AS d FROM item "
            "JOIN resource ON resource.resource_id = item.resource_id JOIN item_vec ON item_vec.item_id = item.item_id "
            f"WHERE {flt[0]} ORDER BY d LIMIT ?",
            (vector, *flt[1], K),
        ).fetchall()
    # Naive hybrid: one statement joining every FTS5 match to its vector distance.
    where = f" AND {flt[0]}" if flt else ""
    joins = (
        "JOIN item ON item.item_id = f.rowid JOIN resource ON resource.resource_id = item.resource_id "
        if flt
        else ""
    )
    return conn.execute(
        "SELECT f.rowid, 0.5 * -bm25(item_fts) + 0.5 * (1 - vec_distance_cosine(v.embedding, ?)) AS s "
        f"FROM item_fts f JOIN item_vec v ON v.item_id = f.rowid {joins}WHERE item_fts MATCH ?{where} "
        "ORDER BY s DESC LIMIT ?",
        (vector, terms, *(flt[1] if flt else []), K),
    ).fetchall()


async def latency(size: int, queries_per_kind: int) -> None:
    rng = random.Random(size)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(cwd=Path(tmp), environ={})
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/bench.db", settings=settings, embedder=create_embedder(f"hash:{DIM}")
        )
        try:
            seconds = await build_corpus(memoir, size, rng, words)
            print(
                f"\n## {size:,} chunks (built in {seconds:.1f} s, {size / seconds:,.0f} chunks/s through replace_document)"
            )
            ctx = memoir.context
            db = memoir.store.db  # type: ignore[attr-defined]
            # vec0 alone (what a one-shot CLI call gets) against the in-process matrix (a server):
            # a second store on the same file with the matrix turned off.
            no_cache = SearchSettings(fusion="rrf", vector_cache=False)
            cold_store = await open_store(f"sqlite:///{tmp}/bench.db", search=no_cache)
            cold_engine = SearchEngine(cold_store, ctx.embedder, no_cache)
            cold: list[float] = []
            for query in make_queries(rng, words, 2, queries_per_kind):
                await timed(
                    lambda q=query: cold_engine.search(
                        SearchRequest(q, SCOPE, (CHUNK_KIND,), K, mode="semantic")
                    ),
                    cold,
                )
            await cold_store.close()
            print(
                f"semantic via vec0 only (no vector cache): p50 {pct(cold, 0.5):.2f} ms, p95 {pct(cold, 0.95):.2f} ms"
            )
            if size >= settings.search.vector_cache_min_items:
                started = time.perf_counter()
                await memoir.store.prepare_vectors(SCOPE, [CHUNK_KIND])
                print(
                    f"vector cache warmed in {time.perf_counter() - started:.1f} s (rows below use it)"
                )
            filters = {
                "none": None,
                "10%": parse_filter("doc.tag = 't10'"),
                "1%": parse_filter("doc.tag = 't1'"),
            }
            sql_of = {
                label: None if f is None else (compile_filter(f).sql, compile_filter(f).params)
                for label, f in filters.items()
            }
            print(
                f"{'query':22s} {'filter':6s} {'ours p50':>9s} {'ours p95':>9s} {'base p50':>9s} {'base p95':>9s} {'p95 ratio':>9s}  results"
            )
            for terms in (2, 5):
                queries = make_queries(rng, words, terms, queries_per_kind)
                vectors = {
                    q: (await ctx.embedder.embed_query(q)).astype(np.float32).tobytes()
                    for q in queries
                }
                for label, flt in filters.items():
                    for mode, base_kind in (
                        ("lexical", "lexical"),
                        ("semantic", "vector"),
                        ("hybrid", "hybrid"),
                    ):
                        ours: list[float] = []
                        base: list[float] = []
                        shortfalls = 0
                        for query in queries:
                            outcome = await timed(
                                lambda q=query, m=mode, f=flt: ctx.engine.search(
                                    SearchRequest(q, SCOPE, (CHUNK_KIND,), K, mode=m, where=f)
                                ),  # type: ignore[arg-type]
                                ours,
                            )
                            if mode != "lexical" and len(outcome.hits) < K:
                                shortfalls += 1
                            await timed(
                                lambda q=query, b=base_kind, f=sql_of[label], v=vectors: db.read(
                                    lambda conn: baseline_sql(conn, b, q, v[q], f)
                                ),
                                base,
                            )
                        ratio = pct(ours, 0.95) / max(pct(base, 0.95), 1e-9)
                        check = "ok" if shortfalls == 0 else f"{shortfalls} short of k"
                        print(
                            f"{mode + ' ' + str(terms) + '-term':22s} {label:6s} {pct(ours, 0.5):9.2f} {pct(ours, 0.95):9.2f} "
                            f"{pct(base, 0.5):9.2f} {pct(base, 0.95):9.2f} {ratio:8.2f}x  {check}"
                        )
            # The whole service call (engine + chunk fetch + spec ordering + snapshot).
            full: list[float] = []
            for query in make_queries(rng, words, 2, queries_per_kind):
                await timed(lambda q=query: run_search(ctx, q, scope=SCOPE, k=K), full)
            print(
                f"DocumentService.search (hybrid, 2-term): p50 {pct(full, 0.5):.2f} ms, p95 {pct(full, 0.95):.2f} ms"
            )
        finally:
            await memoir.close()


def packing(repeats: int) -> None:
    counter = create_token_counter("tiktoken:o200k_base")
    rng = random.Random(3)
    words = vocabulary(rng)
    candidates = []
    for i in range(50):
        text = " ".join(rng.choices(words, k=150))
        candidates.append(
            PackCandidate(
                f"c{i}",
                f"d{i % 12}",
                text,
                counter.count(text),
                0,
                len(text),
                f"/p/{i % 12}",
                "h",
                None,
            )
        )
    counter.truncate("warm up", 1)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        pack(
            candidates,
            budget_tokens=1200,
            truncate=counter.truncate,
            count=counter.count,
            diversity=2,
            separator_tokens=1,
        )
        times.append((time.perf_counter() - started) * 1000)
    baseline = []
    for _ in range(repeats):  # baseline: just summing the stored counts of the candidates
        started = time.perf_counter()
        sum(c.tokens for c in candidates)
        baseline.append((time.perf_counter() - started) * 1000)
    print(
        f"\n## context packing, 50 candidates, budget 1200, diversity 2: p50 {pct(times, 0.5):.3f} ms, "
        f"p95 {pct(times, 0.95):.3f} ms (target <= 1 ms); {pct(times, 0.5) / max(pct(baseline, 0.5), 1e-9):.0f}x a bare sum of counts"
    )


async def quality(limit: int | None, embedder_spec: str = "local") -> None:
    records = [
        json.loads(line)
        for line in (ROOT / "bench" / "data" / "sqlite_capi_eval.jsonl").read_text().splitlines()
    ]
    if limit:
        records = records[:limit]
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(cwd=Path(tmp), environ={})
        memoir = await Memoir.open(
            f"sqlite:///{tmp}/q.db", settings=settings, embedder=create_embedder(embedder_spec)
        )
        try:
            await memoir.embedder.ensure_loaded()
            started = time.perf_counter()
            for record in records:
                await memoir.documents.add_text(
                    record["text"], path=f"capi/{record['id']}.md", scope="q"
                )
            took = time.perf_counter() - started
            chunks = (await memoir.documents.stats(scope="q"))["documents"]["chunks"]
            print(
                f"\n## quality: {len(records)} queries over {len(records)} docs / {chunks} chunks, embedder {embedder_spec} "
                f"(ingest {took:.1f} s, {chunks / took:.0f} chunks/s with the embedder)"
            )
            configs = [
                ("lexical (bm25)", "lexical", {}),
                ("semantic", "semantic", {}),
                ("hybrid rrf k=60 1:1", "hybrid", {"fusion": "rrf"}),
                ("hybrid weighted 1:1", "hybrid", {"fusion": "weighted"}),
            ]
            scores: dict[str, float] = {}
            print(f"{'config':22s} {'R@1':>6s} {'R@10':>6s} {'MRR@10':>7s}")
            for name, mode, over in configs:
                ctx = dataclasses.replace(
                    memoir.context,
                    settings=load_settings({"search": over}, cwd=Path(tmp), environ={}),
                )
                r1 = r10 = mrr = 0.0
                for record in records:
                    response = await run_search(
                        ctx, record["query"], scope=Scope.of("q"), k=30, mode=mode
                    )  # type: ignore[arg-type]
                    docs: list[str] = []
                    for result in response.results or []:
                        if result.doc and result.doc.path not in docs:
                            docs.append(result.doc.path or "")
                    target = f"capi/{record['id']}.md"
                    if target in docs[:10]:
                        rank = docs.index(target) + 1
                        r10 += 1
                        mrr += 1 / rank
                        r1 += rank == 1
                n = len(records)
                scores[name] = mrr / n
                print(f"{name:22s} {r1 / n:6.3f} {r10 / n:6.3f} {mrr / n:7.3f}")
            best_arm = max(scores["lexical (bm25)"], scores["semantic"])
            for name in ("hybrid rrf k=60 1:1", "hybrid weighted 1:1"):
                verdict = "ok" if scores[name] >= best_arm else "WORSE than the better arm"
                print(
                    f"{name}: MRR@10 {scores[name]:.3f} vs better arm {best_arm:.3f} ({scores[name] / best_arm:.2f}x) {verdict}"
                )
        finally:
            await memoir.close()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="10k chunks, fewer queries, 60 quality queries"
    )
    parser.add_argument(
        "--sizes", default=None, help="comma-separated chunk counts (default 10000,100000)"
    )
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--no-latency", action="store_true", help="quality figures only")
    parser.add_argument(
        "--quality-embedder",
        default="local",
        help="embedder of the quality run: local (MiniLM, default) or hash:384 (test embedder)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in (args.sizes or ("10000" if args.quick else "10000,100000")).split(",")]
    print(
        "# bench_search: ours = memory_core.retrieval.engine.SearchEngine; base = raw SQLite in the same process"
    )
    if not args.no_latency:
        for size in sizes:
            await latency(size, 20 if args.quick else 40)
        packing(200 if args.quick else 2000)
    if not args.no_quality:
        await quality(60 if args.quick else None, args.quality_embedder)


if __name__ == "__main__":
    anyio.run(main)
