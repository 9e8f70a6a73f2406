"""Memorize with running category centroids (issue 12) against the full member read, same run.

    nice -n 10 .venv/bin/python bench/bench_centroids.py [--items 10000] [--backends memory,sqlite]
        [--memorizes 60] [--fill-statements 200]

Per backend one store is filled to ``--items`` items (bench_pipeline's fill: 20 users, Zipf
vocabulary), then 5-statement memorizes are timed in alternating blocks of 10: ``full``
(persist_index ``incremental_centroids=False``: every member of the touched categories read,
the pre-issue-12 path) and ``incremental`` (sums + reserve, members read only when the bound
cannot prove the choice exact). Alternating blocks share the machine's load. Also printed: how
many touched categories the incremental path still read in full.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_pipeline import USERS, _chat, _pct, _service, _vocabulary, fill  # noqa: E402


def run(backend: str, items: int, memorizes: int, statements: int, folder: Path) -> dict[str, Any]:
    rng = random.Random(7)
    words = _vocabulary(rng)
    service = _service(backend, folder, "hash:384")
    stored, fill_s, _ = fill(service, items, rng, words, statements)
    if statements > 40:
        service.config("extract_items", max_items=40)
    store: Any = service.store
    reads: list[int] = [0]
    original = store.category_members

    def counted(scope: Any, keys: Any) -> Any:
        reads[0] += len(keys)
        return original(scope, keys)

    store.category_members = counted  # counts calls on the real store, changes nothing
    times: dict[str, list[float]] = {"full": [], "incremental": []}
    touched = {"full": 0, "incremental": 0}
    read_by_mode = {"full": 0, "incremental": 0}
    for block in range(2 * (memorizes // 10)):
        mode = "full" if block % 2 == 0 else "incremental"
        service.config("persist_index", incremental_centroids=mode == "incremental")
        for n in range(10):
            scope, sentences = _chat(rng, words, len(USERS), block * 10 + n, 5)
            before = reads[0]
            t0 = time.perf_counter()
            result = service.memorize(
                scope, conversation=[{"role": "user", "content": " ".join(sentences)}]
            )
            times[mode].append((time.perf_counter() - t0) * 1000)
            touched[mode] += len(result.categories)
            read_by_mode[mode] += reads[0] - before
    service.close()
    return {
        "backend": backend,
        "items": stored,
        "fill_s": fill_s,
        **{
            f"{mode}_{stat}": fn(times[mode])
            for mode in times
            for stat, fn in (("p50", statistics.median), ("p95", lambda v: _pct(v, 0.95)))
        },
        "touched": touched["incremental"],
        "read_in_full": read_by_mode["incremental"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--backends", default="memory,sqlite")
    parser.add_argument("--memorizes", type=int, default=60, help="per mode, in blocks of 10")
    parser.add_argument("--fill-statements", type=int, default=200)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            run(b, args.items, args.memorizes, args.fill_statements, Path(tmp))
            for b in args.backends.split(",")
        ]
    end_load = os.getloadavg()[0]
    print(f"load average {load:.1f} -> {end_load:.1f}")
    print("| backend | items | memorize full p50 / p95 ms | incremental p50 / p95 ms | "
          "ratio p50 / p95 | touched categories read in full |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['backend']} | {r['items']} | {r['full_p50']:.1f} / {r['full_p95']:.1f} | "
            f"{r['incremental_p50']:.1f} / {r['incremental_p95']:.1f} | "
            f"{r['incremental_p50'] / r['full_p50']:.2f}x / "
            f"{r['incremental_p95'] / r['full_p95']:.2f}x | "
            f"{r['read_in_full']} of {r['touched']} |"
        )


if __name__ == "__main__":
    main()
