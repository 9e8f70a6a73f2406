"""Memory-layer vector products without BLAS threads: nearest search and the pipeline on the
in-memory store, with ``matrix @ vector`` (BLAS gemv, OpenBLAS threads on every core: the
baseline) against ``inner_products`` (one single-threaded dot per row: what the stores use).

    nice -n 10 .venv/bin/python bench/bench_layer_vectors.py [--sizes 1600,10000]
        [--items 10000] [--queries 200] [--memorizes 60] [--skip-pipeline]

- ``nearest``: ``VectorBlock.top(query, 50)`` over n random unit vectors of 384 dims, the two
  products interleaved query by query (same vectors, same queries, same process).
- ``pipeline`` (in-memory store filled to ``--items`` by bench_pipeline's fill): retrieve over
  ``org_id=acme, user_id=ANY`` and 5-statement memorizes, in alternating blocks per product.

Ratios are baseline / ours (above 1: ours is faster). The load average is printed: the
baseline's cost depends on how busy the cores are.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_pipeline import USERS, _chat, _service, _vocabulary, fill  # noqa: E402

from memory_core.pipeline.scopes import ANY, ScopeSelector  # noqa: E402
from memory_core.storage.layer import vectors  # noqa: E402

Product = Callable[[np.ndarray, np.ndarray], np.ndarray]
OURS: Product = vectors.inner_products


def blas(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    return matrix @ vector


PRODUCTS: dict[str, Product] = {"blas": blas, "ours": OURS}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def nearest(n: int, queries: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(n)
    block = vectors.VectorBlock(384)
    matrix = rng.standard_normal((n, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    for i, row in enumerate(matrix):
        block.put(f"i{i}", row)
    asked = rng.standard_normal((queries, 384)).astype(np.float32)
    timings: dict[str, list[float]] = {name: [] for name in PRODUCTS}
    results: dict[str, list[list[str]]] = {name: [] for name in PRODUCTS}
    for query in asked:
        for name, product in PRODUCTS.items():
            vectors.inner_products = product
            started = time.perf_counter()
            hits = block.top(query, 50)
            timings[name].append((time.perf_counter() - started) * 1000)
            results[name].append([h[0] for h in hits])
    vectors.inner_products = OURS
    same = sum(a == b for a, b in zip(results["blas"], results["ours"], strict=True))
    out = {
        name: {"p50_ms": statistics.median(t), "p95_ms": _pct(t, 0.95)}
        for name, t in timings.items()
    }
    out["agreement"] = {"same_top50": same / queries}
    return out


def pipeline(items: int, queries: int, memorizes: int) -> dict[str, dict[str, float]]:
    rng = random.Random(7)
    words = _vocabulary(rng)
    with tempfile.TemporaryDirectory() as folder:
        service = _service("memory", Path(folder), "hash:384")
        stored, fill_s, chats = fill(service, items, rng, words, 200)
        service.config("extract_items", max_items=40)
        print(f"filled {stored} items in {fill_s:.0f} s", flush=True)
        texts = [s for _, ss in chats for s in ss]
        asked = [" ".join(rng.choice(texts).split()[2:5]) for _ in range(queries)]
        selector = ScopeSelector(org_id="acme", user_id=ANY)
        service.retrieve(selector, asked[0])  # warm-up: the range's vector matrix
        retrieve: dict[str, list[float]] = {name: [] for name in PRODUCTS}
        memorize: dict[str, list[float]] = {name: [] for name in PRODUCTS}
        block = 10
        for start in range(0, queries, block):
            for name, product in PRODUCTS.items():
                vectors.inner_products = product
                for query in asked[start : start + block]:
                    t0 = time.perf_counter()
                    service.retrieve(selector, query)
                    retrieve[name].append((time.perf_counter() - t0) * 1000)
        n = len(chats)
        for _start in range(0, memorizes, 5):
            for name, product in PRODUCTS.items():
                vectors.inner_products = product
                for _ in range(5):
                    scope, sentences = _chat(rng, words, len(USERS), n, 5)
                    n += 1
                    t0 = time.perf_counter()
                    service.memorize(
                        scope, conversation=[{"role": "user", "content": " ".join(sentences)}]
                    )
                    memorize[name].append((time.perf_counter() - t0) * 1000)  # fmt: skip
        vectors.inner_products = OURS
        service.close()
    return {
        name: {
            "retrieve_p50_ms": statistics.median(retrieve[name]),
            "retrieve_p95_ms": _pct(retrieve[name], 0.95),
            "memorize_p50_ms": statistics.median(memorize[name]),
            "memorize_p95_ms": _pct(memorize[name], 0.95),
        }
        for name in PRODUCTS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1600,10000")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--memorizes", type=int, default=60)
    parser.add_argument("--skip-pipeline", action="store_true")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}; numpy {np.__version__}", flush=True)
    for size in (int(s) for s in args.sizes.split(",")):
        got = nearest(size, args.queries)
        b, o = got["blas"], got["ours"]
        print(
            f"nearest n={size}: blas p50 {b['p50_ms']:.3f} p95 {b['p95_ms']:.3f} ms | ours p50 "
            f"{o['p50_ms']:.3f} p95 {o['p95_ms']:.3f} ms | ratio p50 "
            f"{b['p50_ms'] / o['p50_ms']:.1f}x p95 {b['p95_ms'] / o['p95_ms']:.1f}x | same top-50 "
            f"{got['agreement']['same_top50']:.0%}",
            flush=True,
        )
    if not args.skip_pipeline:
        got = pipeline(args.items, args.queries, args.memorizes)
        b, o = got["blas"], got["ours"]
        for key in ("retrieve_p50_ms", "retrieve_p95_ms", "memorize_p50_ms", "memorize_p95_ms"):
            print(
                f"pipeline {args.items} items {key}: blas {b[key]:.2f} | ours {o[key]:.2f} | "
                f"ratio {b[key] / o[key]:.2f}x",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
