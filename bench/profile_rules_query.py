"""Where a ``query_directives`` call spends its time, at 2,000 directives, in any worktree.

    .venv/bin/python bench/profile_rules_query.py [--tree PATH] [--store DIR] [--stages]
        [--cprofile] [--rounds N]

Builds ``bench_rules.py``'s 2k corpus with the local model into ``--store`` once (about a
minute; reused by later runs, one store per schema: a tree before the storage seam needs its
own), then runs its 50 tasks ``--rounds`` times (default 3) and prints:

- process CPU per query, all threads (ONNX, SQLite reader and writer): far less sensitive to
  the machine's load than wall time, so trees measured minutes apart compare; and the event
  loop thread's own CPU (the Python work of ranking and packing, without the ONNX, reader
  and writer threads: the least noisy figure of the rules-side code);
- wall p50 / p95 per query;
- with ``--stages``: wall time per stage (store reads and writes, embedding, lexical arm,
  ranking, packing, the run record and its redaction in the writer thread), by wrapping the
  functions of the tree under test (names it lacks are skipped); the wrappers cost CPU, so
  read the CPU figure from a run without them;
- with ``--cprofile``: the main thread's profile (threads are not in it).

``--tree`` runs another worktree's code (its own ``.venv`` is not needed, only its sources
and this interpreter's packages), e.g. the commit before the storage seam next to ``main``
(docs/benchmarks-seam.md).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

_STAGES: dict[str, list[float]] = {}


def _record(label: str, started: float) -> None:
    _STAGES.setdefault(label, []).append((time.perf_counter() - started) * 1000)


def _wrap(owner: Any, name: str, label: str) -> None:
    if not hasattr(owner, name):
        return
    fn = getattr(owner, name)
    if getattr(fn, "__code__", None) is not None and fn.__code__.co_flags & 0x80:  # coroutine

        @functools.wraps(fn)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                _record(label, started)

        setattr(owner, name, timed_async)
        return

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _record(label, started)

    setattr(owner, name, timed)


def _wrap_stages(service: Any, memoir: Any) -> None:
    from memory_core.rules import candidates
    from memory_core.rules import service as service_module
    from memory_core.storage.sqlite import database

    for name in ("redact_text", "_in_transaction"):
        _wrap(database, name, f"{name} (writer thread)")
    _wrap(database.SqliteDatabase, "read", "store read (hop)")
    _wrap(database.SqliteDatabase, "write", "store write (hop)")
    _wrap(service_module, "search_arms", "search_arms")
    for name in (
        "rank_candidates",
        "pack_directives",
        "query_run_payload",
        "score_directive",
        "short_reason",
        "restatement_key",
    ):
        _wrap(service_module, name, name)
    _wrap(type(service), "_index", "_index (version read)")
    _wrap(type(service._runs), "record", "run record")
    _wrap(type(memoir.embedder), "embed_query", "embed_query")
    _wrap(candidates, "_lexical_arm", "lexical arm (reader thread)")
    _wrap(candidates, "_in_memory_semantic", "in-memory semantic")


async def _run(args: argparse.Namespace) -> None:
    import bench_rules

    from memory_core.rules.service import RulesService

    store: Path = args.store
    store.mkdir(parents=True, exist_ok=True)
    fresh = not (store / "bench.db").exists()
    memoir = await bench_rules.open_store(store, "local")
    service = RulesService(memoir.context, cwd=store)
    try:
        if fresh:
            bench_rules.write_corpus(store / "rules2k", 500, 4)
            started = time.perf_counter()
            await service.upsert_markdown([str(store / "rules2k")], scope="b")
            print(f"built the 2k store in {time.perf_counter() - started:.1f} s")
        queries = bench_rules.tasks(50)
        await service.query_directives(queries[0], scope="b")  # builds the ranker index
        if args.stages:
            _wrap_stages(service, memoir)
        profile = cProfile.Profile() if args.cprofile else None
        wall: list[float] = []
        cpu_started, wall_started = time.process_time(), time.perf_counter()
        thread_started = time.thread_time()
        for _ in range(args.rounds):
            for task in queries:
                started = time.perf_counter()
                if profile:
                    profile.enable()
                await service.query_directives(task, scope="b")
                if profile:
                    profile.disable()
                wall.append((time.perf_counter() - started) * 1000)
        n = len(wall)
        cpu = (time.process_time() - cpu_started) * 1000 / n
        main_cpu = (time.thread_time() - thread_started) * 1000 / n
        mean = (time.perf_counter() - wall_started) * 1000 / n
        wall.sort()
        print(
            f"{n} queries: process CPU {cpu:.2f} ms/query (event-loop thread {main_cpu:.2f}), "
            f"wall mean {mean:.2f} ms"
        )
        print(f"wall p50 {statistics.median(wall):.2f} ms, p95 {wall[round(0.95 * n) - 1]:.2f} ms")
        for label, values in sorted(_STAGES.items(), key=lambda kv: -sum(kv[1])):
            print(
                f"  {label:<30} calls/query {len(values) / n:5.1f}  ms/query "
                f"{sum(values) / n:6.2f}  p50/call {statistics.median(values):7.3f} ms"
            )
        if profile:
            pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
    finally:
        if hasattr(service, "close"):  # trees whose query runs are written in the background
            await service.close()
        await memoir.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--store", type=Path, default=Path("/tmp/memoir_profile_rules_2k"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stages", action="store_true", help="wall time per stage")
    parser.add_argument("--cprofile", action="store_true", help="main-thread cProfile")
    args = parser.parse_args()
    tree = args.tree.resolve()
    sys.path[:0] = [str(tree), str(tree / "bench")]
    print(f"tree {tree}")
    anyio.run(_run, args)


if __name__ == "__main__":
    main()
