"""Foundation benchmarks: item write throughput and CLI cold-start time.

1. Writing items with their FTS and vector rows (precomputed 384-d vectors) through memoir's
   store, against raw DB-API code doing the same inserts in the same transactions, same run.
   Target: memoir ≥ 0.8× raw throughput.
2. Cold ``memoir --version`` and ``memoir stats`` wall time, against a bare ``python -c pass``.

Usage: python bench/bench_store.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_core.config import load_settings  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.models import NewItem, content_hash, stable_id  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402
from memory_core.storage.sqlite.driver import load_vec_extension, select_driver  # noqa: E402
from memory_core.storage.sqlite.meta import create_vector_table  # noqa: E402
from memory_core.storage.sqlite.migrate import apply_pending  # noqa: E402
from server.logging_setup import configure_logging  # noqa: E402

DIM = 384


def make_corpus(n: int) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(7)
    words = [
        "retry",
        "cache",
        "deploy",
        "schema",
        "token",
        "index",
        "query",
        "budget",
        "user",
        "request",
        "latency",
        "memory",
        "vector",
        "lexical",
        "rule",
        "agent",
    ]
    texts = [" ".join(rng.choice(words, size=60)) + f" doc{i}" for i in range(n)]
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return texts, vectors


def raw_insert(path: Path, texts: list[str], vectors: np.ndarray, batch: int) -> float:
    driver = select_driver()
    conn = driver.connect(str(path), isolation_level=None)
    load_vec_extension(conn)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    # The same schema memoir uses (its migrations, its vec0 table), so the ratio measures
    # memoir's own overhead, not a different table layout.
    conn.execute("BEGIN IMMEDIATE")
    apply_pending(conn, driver.module.complete_statement)
    create_vector_table(conn, DIM)
    conn.execute("COMMIT")
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        conn.execute("BEGIN IMMEDIATE")
        fts, vec = [], []
        for i in range(start, min(start + batch, len(texts))):
            cur = conn.execute(
                "INSERT INTO item (uid, scope, kind, resource_id, category_id, text, content_hash, "
                "start_offset, end_offset, start_line, end_line, token_count, simhash, importance, "
                "pinned, tags, created_at, updated_at, metadata) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(uid) DO NOTHING",
                (
                    stable_id("b", i),
                    "s",
                    "chunk",
                    None,
                    None,
                    texts[i],
                    content_hash(texts[i]),
                    None,
                    None,
                    None,
                    None,
                    60,
                    None,
                    0.5,
                    0,
                    "[]",
                    "t",
                    "t",
                    "{}",
                ),
            )
            fts.append((cur.lastrowid, texts[i], ""))
            vec.append((cur.lastrowid, "s", "chunk", vectors[i].tobytes()))
        conn.executemany("INSERT INTO item_fts(rowid, text, tags) VALUES (?,?,?)", fts)
        conn.executemany(
            "INSERT INTO item_vec(item_id, scope, kind, embedding) VALUES (?,?,?,?)", vec
        )
        conn.execute("COMMIT")
    took = time.perf_counter() - started
    conn.close()
    return took


async def memoir_insert(path: Path, texts: list[str], vectors: np.ndarray, batch: int) -> float:
    embedder = create_embedder("hash:384")  # identity only: vectors are precomputed
    memoir = await Memoir.open(
        f"sqlite:///{path}", settings=load_settings(environ={}), embedder=embedder
    )
    items = [
        NewItem(
            uid=stable_id("b", i),
            kind="chunk",
            text=t,
            token_count=60,
            scope=Scope.of("s"),
            content_hash=content_hash(t),
        )
        for i, t in enumerate(texts)
    ]
    started = time.perf_counter()
    for start in range(0, len(items), batch):
        part, rows = items[start : start + batch], vectors[start : start + batch]
        await memoir.store.write(lambda tx, p=part, r=rows: tx.items.add(p, r))  # type: ignore[misc]
    took = time.perf_counter() - started
    await memoir.close()
    return took


def cold(cmd: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    configure_logging("warning")
    n = 5_000 if args.quick else 20_000
    batch = 500
    texts, vectors = make_corpus(n)

    print(f"== item writes with FTS + vector rows: {n} items, {batch} per transaction, {DIM}-d")
    with tempfile.TemporaryDirectory() as tmp:
        rounds = 1 if args.quick else 3
        raw_times, ours = [], []
        for r in range(rounds):
            raw_times.append(raw_insert(Path(tmp) / f"raw{r}.db", texts, vectors, batch))
            ours.append(
                anyio.run(memoir_insert, Path(tmp) / f"memoir{r}.db", texts, vectors, batch)
            )
        raw_t, our_t = min(raw_times), min(ours)
        print(f"raw DB-API      {n / raw_t:10.0f} items/s  ({raw_t * 1000:.0f} ms)")
        print(f"memoir store    {n / our_t:10.0f} items/s  ({our_t * 1000:.0f} ms)")
        print(f"ratio memoir/raw throughput: {raw_t / our_t:.2f}x   (target >= 0.80x)")

        print("\n== CLI cold start (median wall time)")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
        env["PYTHONPATH"] = str(ROOT)
        runs = 3 if args.quick else 7
        base = cold([sys.executable, "-c", "pass"], runs, env)
        version = cold([sys.executable, "-m", "server.cli", "--version"], runs, env)
        store = Path(tmp) / "cli"
        subprocess.run(
            [sys.executable, "-m", "server.cli", "init", str(store)],
            check=True,
            capture_output=True,
            env=env,
        )
        stats = cold(
            [
                sys.executable,
                "-m",
                "server.cli",
                "--db",
                f"sqlite:///{store}/memoir.db",
                "stats",
                "--json",
            ],
            runs,
            env,
        )
        print(f"python -c pass  {base * 1000:7.0f} ms (baseline)")
        print(f"memoir --version{version * 1000:7.0f} ms  ({version / base:.1f}x baseline)")
        print(f"memoir stats    {stats * 1000:7.0f} ms  ({stats / base:.1f}x baseline)")


if __name__ == "__main__":
    main()
