"""Fill a PostgreSQL layer store from a memorize-filled SQLite one: the same rows, in big batches.

A 100k PostgreSQL fill through ``memorize`` spends its time in the dedupe step (one HNSW search
per candidate statement against the scope, 200 per fill conversation) on a loaded machine: more
than 40 minutes. The rows that fill leaves behind are those the SQLite fill (same seed, same
pipeline) leaves in ``layer.db``, so this copies them through the PostgreSQL store's own write
API (``upsert_items``, ``upsert_categories``, ``add_intention``, ``add_resource``: the calls the
memorize persist step makes, tsvector and vector written by the store code), 2 000 items per
call, with the HNSW index dropped for the load and rebuilt once after it from its own definition
(``pg_indexes.indexdef``), as ``bulk_load.py`` does for the knowledge store. Every item is
copied with its status, version, category and timestamps; every intention version and every
resource row too.

``--check`` shows on a small store that a copied PostgreSQL store answers like a memorize-filled
one: it fills a SQLite file and a PostgreSQL database through ``memorize`` (same seed), copies
the SQLite rows into a second PostgreSQL database, and compares the items (id, text, category,
status, version) and the retrieve answers (context item ids, in order) of the two.

    .venv/bin/python bench/layer_copy.py --check --items 3000
    .venv/bin/python bench/layer_copy.py --sqlite DIR/layer.db --reuse-dir DIR --database NAME
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pipeline
from bench_layer_runners import _log, _reused_postgres, _service
from bench_pipeline import PgServer, _vocabulary

from memory_core.pipeline.contract import SyncRunner
from memory_core.pipeline.scopes import ANY, ScopeSelector
from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer import sql_common as sql

FIELDS = ["org_id", "user_id"]
EVERYONE: dict[str, Any] = {"org_id": ("acme",), "user_id": None}
BATCH = 2000


def copy_layer(sqlite_path: Path, pg_url: str) -> dict[str, float]:
    """Copy the layer rows of ``sqlite_path`` into the (provisioned, empty) layer at ``pg_url``."""
    import psycopg

    source = _service({"provider": "sqlite", "path": str(sqlite_path)}, SyncRunner())
    target = _service({"provider": "postgres", "url": pg_url}, SyncRunner())
    started = time.perf_counter()
    items = source.store.items(EVERYONE, status=None)
    target.store.upsert_items(items[:1])  # types the vector column and creates its index
    with psycopg.connect(pg_url, autocommit=True) as conn:
        found = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'layer_item_hnsw' "
            "AND schemaname = current_schema()"
        ).fetchone()
        assert found is not None, "the PostgreSQL layer store has no HNSW index"
        conn.execute("DROP INDEX layer_item_hnsw")
    for start in range(1, len(items), BATCH):
        target.store.upsert_items(items[start : start + BATCH])
        _log(f"copy: {min(start + BATCH, len(items))}/{len(items)} items")
    loaded = time.perf_counter()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(found[0])
        conn.execute("ANALYZE layer_item")
    indexed = time.perf_counter()
    target.store.upsert_categories(source.store.categories(EVERYONE))
    with sqlite3.connect(sqlite_path) as db:
        cols = sql.scope_columns(FIELDS)
        for row in db.execute(f"SELECT {cols}, {sql.INTENTION_COLUMNS} FROM layer_intention"):
            target.store.add_intention(sql.intention_row(FIELDS, row))
        resources = db.execute(f"SELECT {cols}, {sql.RESOURCE_COLUMNS} FROM layer_resource")
        for row in resources:
            target.store.add_resource(sql.resource_row(FIELDS, row))
    done = time.perf_counter()
    source.close()
    target.close()
    return {
        "items": len(items),
        "load_s": loaded - started,
        "index_s": indexed - loaded,
        "rest_s": done - indexed,
        "total_s": done - started,
    }


def _answers(service: MemoryService, asked: list[str]) -> list[list[str]]:
    selector = ScopeSelector(org_id="acme", user_id=ANY)
    out = []
    for query in asked:
        result = service.retrieve(selector, query)
        out.append([result.layer, *(str(item.get("item_id")) for item in result.items)])
    return out


def fill_and_copy(items: int, sqlite_path: Path, filled_url: str, copied_url: str) -> None:
    """Fill ``sqlite_path`` and ``filled_url`` through ``memorize`` (the bench fill, same seed),
    then copy the SQLite rows into ``copied_url``."""
    sqlite = {"provider": "sqlite", "path": str(sqlite_path)}
    for metadata in (sqlite, {"provider": "postgres", "url": filled_url}):
        rng = random.Random(7)
        words = _vocabulary(rng)
        service = _service(metadata, SyncRunner())
        stored, took, _ = bench_pipeline.fill(service, items, rng, words, 200)
        service.config("extract_items", max_items=40)
        _log(f"check: {metadata['provider']} filled through memorize: {stored} items, {took:.0f} s")
        service.close()
    copied = copy_layer(sqlite_path, copied_url)
    _log(f"check: copied {copied['items']} items in {copied['total_s']:.0f} s")


def compare(filled_url: str, copied_url: str, queries: int = 30) -> dict[str, int | bool]:
    """What a search depends on, in a memorize-filled and a copied PostgreSQL layer: items (id,
    text, category, status, version), categories (scope, key, item count), and the retrieve
    answers (layer reached, item ids in order) to ``queries`` bench queries."""
    filled = _service({"provider": "postgres", "url": filled_url}, SyncRunner())
    copy = _service({"provider": "postgres", "url": copied_url}, SyncRunner())

    def rows(service: MemoryService) -> set[tuple[Any, ...]]:
        return {
            (r.item_id, r.text, r.category_key, r.status, r.version)
            for r in service.store.items(EVERYONE, status=None)
        }

    def categories(service: MemoryService) -> set[tuple[Any, ...]]:
        found = service.store.categories(EVERYONE)
        return {(c.scope["user_id"], c.category_key, c.item_count) for c in found}

    a, b = rows(filled), rows(copy)
    rng = random.Random(11)
    words = _vocabulary(random.Random(7))
    asked = [f"{rng.choice(words)} {rng.choice(words)} migration" for _ in range(queries)]
    answers = _answers(filled, asked), _answers(copy, asked)
    result: dict[str, int | bool] = {
        "items_filled": len(a),
        "items_copied": len(b),
        "items_identical": len(a & b),
        "categories_identical": categories(filled) == categories(copy),
        "answers_identical": sum(x == y for x, y in zip(*answers, strict=True)),
        "queries": queries,
    }
    filled.close()
    copy.close()
    return result


def check(items: int) -> bool:
    """Memorize-filled PostgreSQL against a copy of a memorize-filled SQLite (same seed)."""
    server = PgServer(None)
    filled_url, copied_url = server.database(), server.database()
    folder = Path(tempfile.mkdtemp(prefix="memoir-layer-copy-"))
    fill_and_copy(items, folder / "layer.db", filled_url, copied_url)
    found = compare(filled_url, copied_url)
    print(found)
    return (
        found["items_filled"] == found["items_copied"] == found["items_identical"]
        and found["categories_identical"] is True
        and found["answers_identical"] == found["queries"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--items", type=int, default=3000, help="store size for --check")
    parser.add_argument("--sqlite", type=Path, help="the memorize-filled SQLite layer file")
    parser.add_argument("--reuse-dir", type=Path, help="bench_layer_runners' --reuse-dir")
    parser.add_argument("--database", default="bench_layer_copy")
    args = parser.parse_args()
    if args.check:
        sys.exit(0 if check(args.items) else 1)
    if args.sqlite is None or args.reuse_dir is None:
        parser.error("give --check, or --sqlite and --reuse-dir")
    url = _reused_postgres(args.reuse_dir.resolve() / "pg", args.database)
    print(copy_layer(args.sqlite, url))


if __name__ == "__main__":
    main()
