"""Agent-memory speed: remember, recall, backfill and trimming, each against a raw baseline.

    .venv/bin/python bench/bench_memories.py [--quick] [--sizes 10000,100000]

At each size, one space holds that many memories (synthetic statements from a Zipf vocabulary,
written through the item port with their SimHash bands and hashing-embedder vectors; the soft
cap is raised above the size so nothing is trimmed), then, in the same process:

- ``remember`` p50 / p95 of new statements through the full write path (normalise, SimHash,
  near-duplicate lookup through the band index, tombstone check, classify, enrich, conflict
  search, insert with the lexical and band rows, events, capacity count) against a raw
  baseline on a plain SQLite table with the same rows: INSERT plus the same four band lookups;
- ``recall`` p50 / p95 (hybrid arms, RRF, tri-score, MMR, packing, ``last_scores`` write-back)
  against a raw FTS5 ``MATCH … ORDER BY rank LIMIT 12`` on the same texts;
- backfill throughput (entries/s through the worker, real local embedder when it loads) against
  the raw embedder on the same texts in the same batch size;
- trimming at the cap: a space at its soft cap (200) gets one more entry per remember; the
  trim step's cost (count, stale-score refresh, ordered select, delete) p50 / p95 against a raw
  ``DELETE … ORDER BY score LIMIT 1`` on the same rows.

Ratios are ours / baseline: the price of doing the spec's work over doing the least SQL.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.memories import capacity  # noqa: E402
from memory_core.memories.enrich import enrich  # noqa: E402
from memory_core.memories.importance import classify_offline, importance_score  # noqa: E402
from memory_core.memories.spaces import MemorySpace  # noqa: E402
from memory_core.memories.text import normalise, simhash64, text_digest  # noqa: E402
from memory_core.memories.writes import NewEntry, new_item  # noqa: E402
from memory_core.service import Memoir  # noqa: E402
from memory_core.storage.sqlite.items import simhash_bands, to_signed64  # noqa: E402

VOCABULARY = 6000
SUBJECTS = ["the user", "the team", "we", "I", "our service", "the client", "the build"]
VERBS = ["prefers", "uses", "avoids", "deploys", "needs", "owns", "schedules", "reviews"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
        )
    return sorted(words)


def statement(rng: random.Random, words: list[str], weights: list[float]) -> str:
    objects = " ".join(rng.choices(words, weights=weights, k=rng.randint(4, 9)))
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {objects}"


def entry(text: str, pair: MemorySpace, created: str, tokens: Any) -> NewEntry:
    norm = normalise(text)
    cls = classify_offline(text)
    info = enrich(text, norm, tags=(), category=cls.category)
    importance = importance_score(
        base=0.3, category=cls.category, manually_saved=False,
        metadata_confidence=info.metadata_confidence, has_metadata=bool(info.keyphrases),
    )  # fmt: skip
    return NewEntry(
        text=text, normalised=norm, digest=text_digest(norm), simhash=simhash64(norm),
        token_count=tokens.count(text), role="user", tags=info.tags, source_ids=(),
        created_at=created, manually_saved=False, pin=False, category=cls.category,
        category_confidence=cls.confidence, importance_model="offline",
        base_importance=importance, importance=importance,
        metadata_confidence=info.metadata_confidence, entities=info.entities,
        keyphrases=info.keyphrases, summary=None, user=pair.user, space=pair.space,
    )  # fmt: skip


async def populate(memoir: Memoir, pair: MemorySpace, texts: list[str]) -> float:
    started = time.perf_counter()
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    scope = pair.scope
    for start in range(0, len(texts), 2000):
        batch = texts[start : start + 2000]
        items = [new_item(entry(t, pair, now, memoir.tokens), scope, now=now) for t in batch]
        vectors = await memoir.embedder.embed_documents(batch)
        for item in items:
            item.metadata["needs_embedding"] = 0
        await memoir.store.write(lambda tx, i=items, v=vectors: tx.items.add(i, v))
    return time.perf_counter() - started


def raw_baseline(path: Path, texts: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")  # as memoir's store: WAL, synchronous NORMAL
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(
        "CREATE TABLE m (id INTEGER PRIMARY KEY, text TEXT, simhash INTEGER, score REAL);"
        "CREATE TABLE band (b INTEGER, v INTEGER, id INTEGER, PRIMARY KEY (b, v, id)) WITHOUT ROWID;"
        "CREATE VIRTUAL TABLE f USING fts5(text);"
    )
    rng = random.Random(3)
    for i, text in enumerate(texts):
        h = simhash64(normalise(text))
        conn.execute("INSERT INTO m VALUES (?,?,?,?)", (i + 1, text, to_signed64(h), rng.random()))
        conn.executemany(
            "INSERT INTO band VALUES (?,?,?)", [(b, v, i + 1) for b, v in simhash_bands(h)]
        )
        conn.execute("INSERT INTO f(rowid, text) VALUES (?,?)", (i + 1, text))
    conn.commit()
    return conn


def raw_remember(conn: sqlite3.Connection, text: str) -> None:
    h = simhash64(normalise(text))
    bands = simhash_bands(h)
    probe = " OR ".join("(b = ? AND v = ?)" for _ in bands)
    conn.execute(
        f"SELECT id FROM band WHERE {probe}", [x for pair in bands for x in pair]
    ).fetchall()
    cursor = conn.execute(
        "INSERT INTO m(text, simhash, score) VALUES (?,?,?)", (text, to_signed64(h), 0.5)
    )
    conn.executemany(
        "INSERT INTO band VALUES (?,?,?)", [(b, v, cursor.lastrowid) for b, v in bands]
    )
    conn.execute("INSERT INTO f(rowid, text) VALUES (?,?)", (cursor.lastrowid, text))
    conn.commit()


def raw_recall(conn: sqlite3.Connection, query: str) -> list[Any]:
    terms = " OR ".join(f'"{w}"' for w in query.split())
    return conn.execute(
        "SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank LIMIT 12", (terms,)
    ).fetchall()


async def timed(fn: Any, *args: Any, **kwargs: Any) -> float:
    started = time.perf_counter()
    await fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


def row(name: str, ours: list[float], base: list[float]) -> str:
    p50, p95, b50, b95 = pct(ours, 0.5), pct(ours, 0.95), pct(base, 0.5), pct(base, 0.95)
    return f"| {name} | {p50:.2f} | {p95:.2f} | {b50:.3f} | {b95:.3f} | {p95 / b95:.0f}x |"


async def bench_size(
    size: int, calls: int, folder: Path, words: list[str], rng: random.Random
) -> list[str]:
    weights = [1.0 / (r + 1) ** 1.05 for r in range(len(words))]
    texts = list(dict.fromkeys(statement(rng, words, weights) for _ in range(size)))
    settings = load_settings(
        {"memories": {"soft_cap": size * 2, "embed_on_write": False, "retention_days": 0}},
        cwd=folder, environ={},
    )  # fmt: skip
    memoir = await Memoir.open(
        f"sqlite:///{folder / f'bench-{size}.db'}",
        settings=settings,
        embedder=create_embedder("hash:384"),
    )
    pair = memoir.memories.space("bench")
    load_s = await populate(memoir, pair, texts)
    conn = raw_baseline(folder / f"raw-{size}.db", texts)
    fresh = [statement(rng, words, weights) + f" case {i}" for i in range(calls)]
    queries = [" ".join(rng.choices(words[:400], k=3)) for _ in range(calls)]
    ours_remember = [await timed(memoir.memories.remember, t, space="bench") for t in fresh]
    base_remember = []
    for t in fresh:
        started = time.perf_counter()
        raw_remember(conn, t + " raw")
        base_remember.append((time.perf_counter() - started) * 1000)
    ours_recall = [await timed(memoir.memories.recall, q, space="bench", k=12) for q in queries]
    base_recall = []
    for q in queries:
        started = time.perf_counter()
        raw_recall(conn, q)
        base_recall.append((time.perf_counter() - started) * 1000)
    await memoir.close()
    conn.close()
    return [
        f"size {size:,}: loaded in {load_s:.1f} s",
        row(f"remember @ {size:,}", ours_remember, base_remember),
        row(f"recall @ {size:,}", ours_recall, base_recall),
    ]


async def bench_trim(folder: Path, words: list[str], rng: random.Random, calls: int) -> str:
    weights = [1.0 / (r + 1) ** 1.05 for r in range(len(words))]
    settings = load_settings(
        {"memories": {"soft_cap": 200, "embed_on_write": False}}, cwd=folder, environ={}
    )
    memoir = await Memoir.open(
        f"sqlite:///{folder / 'trim.db'}", settings=settings, embedder=create_embedder("hash:384")
    )
    pair = memoir.memories.space("trim")
    await populate(
        memoir, pair, list(dict.fromkeys(statement(rng, words, weights) for _ in range(200)))
    )
    ours = []
    for i in range(calls):
        text = statement(rng, words, weights) + f" trim {i}"
        now = datetime.now(UTC)
        await memoir.memories.remember(text, space="trim", embed_now=False, now=now)
        # Time the trim step alone on a space one over its cap (as remember runs it).
        extra = new_item(
            entry(text + " x", pair, now.isoformat(), memoir.tokens),
            pair.scope,
            now=now.isoformat(),
        )
        await memoir.store.write(lambda tx, e=extra: tx.items.add([e]))
        started = time.perf_counter()
        await memoir.store.write(
            lambda tx, moment=now: capacity.enforce_capacity(
                tx, pair.scope, cap=200, now=moment, stale_hours=24, tau_days=7
            )
        )
        ours.append((time.perf_counter() - started) * 1000)
    await memoir.close()
    conn = raw_baseline(
        folder / "raw-trim.db", [statement(rng, words, weights) for _ in range(200)]
    )
    base = []
    for i in range(calls):
        conn.execute(
            "INSERT INTO m(text, simhash, score) VALUES (?,?,?)", (f"x {i}", 0, rng.random())
        )
        started = time.perf_counter()
        conn.execute("DELETE FROM m WHERE id IN (SELECT id FROM m ORDER BY score LIMIT 1)")
        conn.commit()
        base.append((time.perf_counter() - started) * 1000)
    conn.close()
    return row("trim at cap 200", ours, base)


async def bench_backfill(folder: Path, words: list[str], rng: random.Random, count: int) -> str:
    embedder = create_embedder("local")
    try:
        await embedder.ensure_loaded()
        name = embedder.embedder_id
    except Exception as exc:  # the local model may be unavailable: say so, use the hash embedder
        print(f"local embedder unavailable ({exc}); backfill with hash:384")
        embedder = create_embedder("hash:384")
        name = embedder.embedder_id
    settings = load_settings(
        {"memories": {"embed_on_write": False, "soft_cap": 100_000}}, cwd=folder, environ={}
    )
    memoir = await Memoir.open(
        f"sqlite:///{folder / 'backfill.db'}", settings=settings, embedder=embedder
    )
    weights = [1.0 / (r + 1) ** 1.05 for r in range(len(words))]
    texts = list(dict.fromkeys(statement(rng, words, weights) for _ in range(count)))
    for text in texts:
        await memoir.memories.remember(text, space="fill", embed_now=False, on_conflict="keep")
    report = await memoir.memories.backfill(batch_size=32)
    started = time.perf_counter()
    for start in range(0, len(texts), 32):
        await embedder.embed_documents(texts[start : start + 32])
    raw_s = time.perf_counter() - started
    await memoir.close()
    raw_rate = len(texts) / raw_s
    return (
        f"| backfill ({name}) | {report.per_second:.0f} entries/s | raw embedder {raw_rate:.0f} texts/s "
        f"| {report.embedded} embedded | ratio {report.per_second / raw_rate:.2f} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 memories, 50 calls")
    parser.add_argument("--sizes", default="10000,100000")
    args = parser.parse_args()
    sizes = [1000, 10000] if args.quick else [int(s) for s in args.sizes.split(",")]
    calls = 50 if args.quick else 200
    rng = random.Random(11)
    words = vocabulary(rng)
    print(
        "| operation | ours p50 ms | ours p95 ms | baseline p50 ms | baseline p95 ms | p95 ratio |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for size in sizes:
            for line in await bench_size(size, calls, folder, words, rng):
                print(line, flush=True)
        print(await bench_trim(folder, words, rng, calls // 2), flush=True)
        print(await bench_backfill(folder, words, rng, 256 if args.quick else 1024), flush=True)
    np.random.default_rng(0)


if __name__ == "__main__":
    anyio.run(main)
