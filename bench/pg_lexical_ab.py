"""Old against new PostgreSQL lexical arm on ONE database: same rows, same queries, alternating.

    .venv/bin/python bench/pg_lexical_ab.py --old /path/to/old/memory_core/storage/postgres/lexical.py
        [--chunks 100000] [--rounds 2]

Loads the synthetic corpus of ``bench_pg.py`` (same generator, same seed, same 80 queries of 2
and 5 terms) into one PostgreSQL database with the current code (``bench/bulk_load.py``, no
HNSW index: only the lexical arm runs), then runs each query's lexical plan as the engine does
(AND, then OR when AND finds fewer than k, ``limit`` = the engine's depth) with the current
``PgLexical`` and with the ``PgLexical`` of another checkout's ``lexical.py`` (e.g. ``main``'s,
which ranks from the tsvectors; the current schema still holds them, and their GIN index is
re-created for it), in turn, who goes first
alternating per query. Prints p50 / p95 of each and asserts the results are identical (ids and
scores, float for float). Both statement versions read the same tables, so the figure isolates
the statements.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_pg import CHUNK_KIND, SCOPE, K, Server, corpus, open_memoir, pct  # noqa: E402
from bench.bulk_load import _drop_hnsw, _pg_copy  # noqa: E402
from memory_core.retrieval.engine import default_plan  # noqa: E402


def _old_lexical(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("old_pg_lexical", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PgLexical


def _plan_hits(lexical: Any, text: str, depth: int) -> tuple[list[Any], float]:
    """The engine's lexical loop for ``text``, and its milliseconds."""
    _, plan = default_plan(text)
    started = time.perf_counter()
    hits: list[Any] = []
    for query in plan:
        found = lexical.search(query, SCOPE, kinds=[CHUNK_KIND], limit=depth)
        if found or not hits:
            hits = found
        if len(hits) >= K:
            break
    return hits, (time.perf_counter() - started) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", type=Path, required=True, help="the other checkout's lexical.py")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the 80 queries")
    args = parser.parse_args()
    old_cls = _old_lexical(args.old)
    from memory_core.storage.postgres.lexical import PgLexical

    size = args.chunks
    batches = corpus(size, seed=size)
    rng = random.Random(size)  # the queries of bench_pg.at_size
    words = sorted({w for _, items, _ in batches[:50] for it in items for w in it.text.split()})
    pool = words[: max(60, len(words) // 2)]
    queries = [" ".join(rng.sample(pool, 2)) for _ in range(40)]
    queries += [" ".join(rng.sample(pool, 5)) for _ in range(40)]
    server = Server()
    print(f"# pg_lexical_ab: PostgreSQL {server.version}, {size:,} chunks, {len(queries)} queries")
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await open_memoir(server.database(), tmp)
        try:
            db = memoir.store.db  # type: ignore[attr-defined]
            db.run_sync(_drop_hnsw, write=True)
            started = time.perf_counter()
            for start in range(0, len(batches), 2000):
                group = batches[start : start + 2000]
                db.run_sync(lambda conn, group=group: _pg_copy(conn, group), write=True)
            print(f"rows loaded in {time.perf_counter() - started:.1f} s", flush=True)
            # The old statement matches tsvectors through their GIN index, which 0004 dropped:
            # give it back, so the old statement runs as it did on its own schema.
            db.run_sync(
                lambda conn: conn.execute(
                    "CREATE INDEX IF NOT EXISTS item_lexical_tsv ON item_lexical USING gin (tsv)"
                ),
                write=True,
            )
            db.run_sync(lambda conn: conn.execute("ANALYZE"), write=True)
            sizes = db.run_sync(
                lambda conn: conn.execute(
                    "SELECT pg_size_pretty(pg_total_relation_size('lexical_posting')), "
                    "(SELECT count(*) FROM lexical_posting), "
                    "pg_size_pretty(pg_total_relation_size('item_lexical')), "
                    "pg_size_pretty(pg_total_relation_size('item_lexical_tsv'))"
                ).fetchone(),
                write=False,
            )
            print(
                f"lexical_posting {sizes[0]} ({sizes[1]:,} rows); item_lexical {sizes[2]} "
                f"(its GIN index, re-created for the old statement: {sizes[3]})",
                flush=True,
            )
            depth = max(50, 3 * K)

            def run(conn: Any) -> tuple[list[float], list[float], int, int]:
                old, new = old_cls(conn), PgLexical(conn)
                for text in queries[:5]:  # warm-up: caches and plans, both versions
                    _plan_hits(old, text, depth)
                    _plan_hits(new, text, depth)
                t_old, t_new, same, found = [], [], 0, 0
                for n in range(args.rounds * len(queries)):
                    text = queries[n % len(queries)]
                    order = [(old, t_old), (new, t_new)]
                    if n % 2:
                        order.reverse()
                    results = {}
                    for lexical, times in order:
                        hits, ms = _plan_hits(lexical, text, depth)
                        times.append(ms)
                        results[id(lexical)] = hits
                    same += results[id(old)] == results[id(new)]
                    found += bool(results[id(new)])
                return t_old, t_new, same, found

            t_old, t_new, same, found = db.run_sync(run, write=False)
        finally:
            await memoir.close()
    runs = len(t_old)
    print(f"old lexical p50/p95 {pct(t_old, 0.5):.1f} / {pct(t_old, 0.95):.1f} ms")
    print(f"new lexical p50/p95 {pct(t_new, 0.5):.1f} / {pct(t_new, 0.95):.1f} ms")
    print(f"identical results (ids and scores): {same} / {runs} ({found} non-empty)")
    if same != runs:
        raise SystemExit("results differ")


if __name__ == "__main__":
    anyio.run(main)
