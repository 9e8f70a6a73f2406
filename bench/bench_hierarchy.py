"""Benchmark the category hierarchy (memoirAI) with the offline model, on SQLite.

Run: ``.venv/bin/python bench/bench_hierarchy.py [--quick] [--embedder hash:384|local]``

Figures, each with its baseline measured in the same run:

- **ingest**: chunks/s through ``ingest_text`` (chunking, token counts, embeddings, one offline
  LLM call per level, the chunk write) vs the raw write of the same chunks with their
  embeddings through ``items.insert_items`` (no classification). Also LLM calls per chunk.
- **query**, per strategy, at N chunks: latency *excluding model time* (the run's total minus
  the time spent inside the model chain), median over the questions, vs one raw SELECT of the
  same chunks the query returned (the floor: reading the answer's rows); LLM calls per query;
  chunks used.

Stores: ``N_ingest`` chunks are ingested for real (1k; ``--quick``: 200); the 10k store
(``--quick``: 1k) adds chunks written straight into the leaves the ingest created, because
classifying 10k chunks one LLM call per level takes minutes even offline (the ingest rate is
the figure above). Questions are drawn from the ingested text.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pydantic_ai.models

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.hierarchy.store import NewChunk
from memory_core.models import NewItem, content_hash, stable_id, utc_now
from memory_core.scope import Scope
from memory_core.service import Memoir
from memory_core.storage.sqlite import items as item_sql
from server.logging_setup import configure_logging

STRATEGIES = ("one_shot", "wide_branch", "zoom_in", "branch_out")
TOPICS = {
    "astronomy": "star planet orbit telescope galaxy comet nebula moon eclipse astronomer",
    "cooking": "recipe oven flour butter sauce simmer knife kitchen spice bread",
    "sailing": "ship sail harbour captain wind mast anchor voyage sailor tide",
    "gardening": "soil seed garden compost prune blossom root weed harvest spade",
    "medicine": "patient doctor fever clinic dose symptom nurse wound surgeon remedy",
    "music": "melody chord rhythm violin piano tempo choir concert composer harmony",
    "law": "court judge contract lawyer verdict statute appeal witness clause trial",
    "chess": "bishop knight pawn castle gambit checkmate opening endgame rook board",
}
FILLER = [
    "the",
    "a",
    "of",
    "and",
    "in",
    "to",
    "with",
    "for",
    "on",
    "by",
    "from",
    "at",
    "as",
    "it",
    "was",
    "is",
    "were",
]


def paragraph(rng: random.Random, topic: str) -> str:
    words = TOPICS[topic].split()
    sentences = []
    for _ in range(rng.randint(6, 9)):
        body = [
            rng.choice(words if rng.random() < 0.5 else FILLER) for _ in range(rng.randint(12, 20))
        ]
        sentences.append(" ".join(body).capitalize() + ".")
    return " ".join(sentences)


def document(rng: random.Random, chunks: int) -> str:
    """About ``chunks`` chunks of ~1.2k characters, one topic per paragraph pair."""
    parts = []
    for _ in range(chunks):
        topic = rng.choice(sorted(TOPICS))
        parts.append(paragraph(rng, topic) + "\n\n" + paragraph(rng, topic))
    return "\n\n".join(parts)


async def open_store(folder: Path, embedder_spec: str, name: str) -> Memoir:
    return await Memoir.open(
        f"sqlite:///{folder}/{name}.db",
        settings=load_settings(cwd=folder, environ={}),
        embedder=create_embedder(embedder_spec),
    )


async def bench_ingest(
    memoir: Memoir, raw: Memoir, rng: random.Random, target: int
) -> dict[str, Any]:
    docs = []
    while sum(len(d) for d in docs) < target * 1500:
        docs.append(document(rng, 10))
    await memoir.embedder.ensure_loaded()
    await memoir.ingest_text("warm-up text about stars.", scope="warm")
    started = time.perf_counter()
    chunks = calls = 0
    for doc in docs:
        result = await memoir.ingest_text(doc, scope="bench")
        assert result.ok, result.error
        chunks += len(result.chunks)
        calls += result.llm_calls
        if chunks >= target:
            break
    took = time.perf_counter() - started

    # Baseline: the same chunks, embedded and written raw (no classification, no category).
    rows = await memoir.store.db.read(
        lambda conn: conn.execute(
            "SELECT text, token_count FROM item WHERE scope = 'bench' ORDER BY item_id"
        ).fetchall()
    )
    await raw.embedder.ensure_loaded()
    started = time.perf_counter()
    for start in range(0, len(rows), 10):
        batch = rows[start : start + 10]
        vectors = await raw.embedder.embed_documents([r[0] for r in batch])
        items = [
            NewItem(
                stable_id("raw", r[0]),
                "chunk",
                r[0],
                r[1],
                scope=Scope.of("bench"),
                created_at=utc_now(),
            )
            for r in batch
        ]
        await raw.store.db.write(item_sql.insert_items, items, vectors)
    raw_took = time.perf_counter() - started
    return {
        "chunks": chunks,
        "seconds": took,
        "chunks_per_s": chunks / took,
        "raw_chunks_per_s": len(rows) / raw_took,
        "llm_calls_per_chunk": calls / max(1, chunks),
        "texts": [r[0] for r in rows],
    }


async def seed(memoir: Memoir, target: int, rng: random.Random) -> int:
    """Fill the store to ``target`` chunks by writing into the existing leaves (no LLM)."""
    store = await memoir.hierarchy.store()
    categories = await store.all_categories(Scope.of("bench"))
    leaves = [c for c in categories if c.level == memoir.settings.hierarchy.depth]
    have = await memoir.store.db.read(
        lambda conn: conn.execute("SELECT count(*) FROM item WHERE scope = 'bench'").fetchone()[0]
    )
    index = 0
    while have < target:
        batch = []
        for _ in range(min(200, target - have)):
            text = document(rng, 1)
            batch.append(
                NewChunk(
                    uid=stable_id("seed", index),
                    text=text,
                    token_count=memoir.tokens.count(text),
                    content_hash=content_hash(text),
                    created_at=utc_now(),
                )
            )
            index += 1
        vectors = await memoir.embedder.embed_documents([c.text for c in batch])
        leaf = leaves[index % len(leaves)]
        await store.add_chunks(Scope.of("bench"), leaf.category_id, batch, vectors)
        have += len(batch)
    return int(have)


async def bench_queries(memoir: Memoir, questions: list[str], budget: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    baseline: list[float] = []
    for strategy in STRATEGIES:
        latencies: list[float] = []
        calls: list[int] = []
        used: list[int] = []
        leaves: list[int] = []
        for question in questions:
            result = await memoir.query(
                question, scope="bench", strategy=strategy, max_token_budget=budget
            )
            runs = await memoir.hierarchy.runs(scope="bench", limit=1, kind="hierarchy_query")
            model_time = runs[0]["payload"]["model_time_s"]
            latencies.append(result.total_latency - model_time)
            calls.append(sum(result.llm_calls.values()))
            used.append(len(result.used_chunks))
            leaves.append(len(result.explored_paths))
            # Baseline: one raw SELECT of the very rows the query returned.
            ids = [c.item_id for c in result.used_chunks]
            started = time.perf_counter()
            marks = ",".join("?" * len(ids))
            await memoir.store.db.read(  # type: ignore[attr-defined]
                lambda conn, i=ids, m=marks: conn.execute(
                    f"SELECT item_id, text FROM item WHERE item_id IN ({m})", i
                ).fetchall()
            )
            baseline.append(time.perf_counter() - started)
        out[strategy] = {
            "non_model_ms": statistics.median(latencies) * 1000,
            "llm_calls": statistics.mean(calls),
            "chunks_used": statistics.mean(used),
            "leaves": statistics.mean(leaves),
        }
    out["raw_read_ms"] = statistics.median(baseline) * 1000
    return out


def questions_from(texts: list[str], rng: random.Random, count: int) -> list[str]:
    picked = []
    for _ in range(count):
        words = [w for w in rng.choice(texts).split() if len(w) > 4][:40]
        picked.append("What about " + " and ".join(rng.sample(words, min(3, len(words)))) + "?")
    return picked


def report_queries(size: int, figures: dict[str, Any]) -> None:
    base = figures["raw_read_ms"]
    print(
        f"\nquery at {size} chunks (baseline: one raw SELECT of the same returned chunks, "
        f"{base:.2f} ms median)"
    )
    print(
        f"  {'strategy':<12} {'non-model ms':>12} {'x raw':>8} {'LLM calls':>10} {'leaves':>7} {'chunks':>7}"
    )
    for strategy in STRATEGIES:
        f = figures[strategy]
        print(
            f"  {strategy:<12} {f['non_model_ms']:>12.2f} {f['non_model_ms'] / base:>8.1f} "
            f"{f['llm_calls']:>10.1f} {f['leaves']:>7.1f} {f['chunks_used']:>7.1f}"
        )


async def main(quick: bool, embedder: str) -> None:
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False  # the offline model only
    configure_logging("error", "console")
    rng = random.Random(7)
    small, large = (200, 1000) if quick else (1000, 10_000)
    questions_n = 5 if quick else 15
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        memoir = await open_store(folder, embedder, "hierarchy")
        raw = await open_store(folder, embedder, "raw")
        try:
            ingest = await bench_ingest(memoir, raw, rng, small)
            print(f"hierarchy bench (embedder {embedder}, offline model, SQLite)")
            print(
                f"\ningest {ingest['chunks']} chunks: {ingest['chunks_per_s']:.1f} chunks/s "
                f"(raw embed+insert {ingest['raw_chunks_per_s']:.1f} chunks/s, ratio "
                f"{ingest['chunks_per_s'] / ingest['raw_chunks_per_s']:.3f}); "
                f"{ingest['llm_calls_per_chunk']:.2f} LLM calls per chunk"
            )
            tree = await memoir.hierarchy.categories(scope="bench")
            print(f"  categories: {tree.total} (cap {tree.max_categories})")
            questions = questions_from(ingest["texts"], rng, questions_n)
            report_queries(ingest["chunks"], await bench_queries(memoir, questions, 2000))
            size = await seed(memoir, large, rng)
            report_queries(size, await bench_queries(memoir, questions, 2000))
        finally:
            await memoir.close()
            await raw.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 / 1k chunks instead of 1k / 10k")
    parser.add_argument(
        "--embedder",
        default="hash:384",
        help="'hash:384' (default: measures the hierarchy, not the embedder; bench_embed.py "
        "measures that) or 'local' (MiniLM)",
    )
    args = parser.parse_args()
    anyio.run(main, args.quick, args.embedder)
