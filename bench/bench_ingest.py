"""Ingest benchmark: chunks per second through memoir's write path, against raw SQLite.

    .venv/bin/python bench/bench_ingest.py [--quick]

1. Store only: prepared chunks (10 per document, random unit vectors) written with
   ``replace_document`` (item + FTS + vec0 rows, old version removed, one transaction per
   document), at 10k and 100k chunks (10k in --quick); baseline: the same rows inserted with
   plain ``executemany`` into the same three tables, one transaction per document, on another
   file in the same process.
2. Whole pipeline with the hashing embedder: ``add_paths`` over generated files (read, chunk
   with exact tiktoken counts, embed, write).
3. With the local MiniLM embedder: ``add_text`` on a sample, chunks/s (embedding dominates).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_core.config import load_settings  # noqa: E402
from memory_core.documents import persistence  # noqa: E402
from memory_core.documents.records import CHUNK_KIND, NewDocument  # noqa: E402
from memory_core.embed import create_embedder  # noqa: E402
from memory_core.models import NewItem, stable_id  # noqa: E402
from memory_core.scope import Scope  # noqa: E402
from memory_core.service import Memoir  # noqa: E402

DIM = 384
PER_DOC = 10
SCOPE = Scope.of("bench")


def words(rng: random.Random, n: int) -> str:
    vocabulary = [f"w{i}" for i in range(5000)]
    return " ".join(rng.choices(vocabulary, k=n))


def prepared(chunks: int) -> list[tuple[NewDocument, list[NewItem], np.ndarray]]:
    rng = random.Random(chunks)
    np_rng = np.random.default_rng(chunks)
    batches = []
    for d in range(chunks // PER_DOC):
        doc_id = stable_id("ingest", d)
        doc = NewDocument(doc_id, SCOPE, f"/c/{d}.md", doc_id, None, 1, ("t",), None)
        items = [
            NewItem(
                stable_id(doc_id, c),
                CHUNK_KIND,
                words(rng, 60),
                60,
                SCOPE,
                start_offset=c,
                end_offset=c + 1,
            )
            for c in range(PER_DOC)
        ]
        vectors = np_rng.standard_normal((PER_DOC, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        batches.append((doc, items, vectors))
    return batches


def raw_insert(
    conn: Any, doc: NewDocument, items: list[NewItem], vectors: np.ndarray, base: int
) -> None:
    conn.execute(
        "INSERT INTO resource (uid, scope, kind, uri, content_hash, created_at, updated_at) VALUES (?,?,?,?,?,?,?)",
        (doc.doc_id, doc.scope.key, "document", doc.path, doc.content_hash, "t", "t"),
    )
    ids = range(base, base + len(items))
    conn.executemany(
        "INSERT INTO item (item_id, uid, scope, kind, text, content_hash, token_count, created_at, updated_at) "
        "VALUES (?,?,?,?,?,?,?,?,?)",
        [
            (i, it.uid, it.scope.key, it.kind, it.text, "h", it.token_count, "t", "t")
            for i, it in zip(ids, items, strict=True)
        ],
    )
    conn.executemany(
        "INSERT INTO item_fts(rowid, text, tags) VALUES (?,?,?)",
        [(i, it.text, "") for i, it in zip(ids, items, strict=True)],
    )
    conn.executemany(
        "INSERT INTO item_vec(item_id, scope, kind, embedding) VALUES (?,?,?,?)",
        [
            (i, it.scope.key, it.kind, v.tobytes())
            for i, it, v in zip(ids, items, vectors, strict=True)
        ],
    )


async def open_store(path: Path, embedder: str = f"hash:{DIM}") -> Memoir:
    return await Memoir.open(
        f"sqlite:///{path}",
        settings=load_settings(cwd=path.parent, environ={}),
        embedder=create_embedder(embedder),
    )


async def store_only(chunks: int) -> None:
    batches = prepared(chunks)
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await open_store(Path(tmp) / "ours.db")
        store = memoir.store
        started = time.perf_counter()
        for doc, items, vectors in batches:
            await store.write(
                lambda tx, d=doc, i=items, v=vectors: persistence.replace_document(tx, d, i, v)  # type: ignore[misc]
            )
        ours = time.perf_counter() - started
        await memoir.close()
        base_store = await open_store(Path(tmp) / "raw.db")
        base_db = base_store.store.db  # type: ignore[attr-defined]
        started = time.perf_counter()
        for index, (doc, items, vectors) in enumerate(batches):
            await base_db.write(raw_insert, doc, items, vectors, index * PER_DOC + 1)
        base = time.perf_counter() - started
        await base_store.close()
    print(
        f"store only, {chunks:,} chunks: ours {chunks / ours:,.0f} chunks/s ({ours:.1f} s), "
        f"raw SQLite {chunks / base:,.0f} chunks/s ({base:.1f} s), ratio {ours / base:.2f}x the raw time"
    )


async def pipeline(files: int) -> None:
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "docs"
        root.mkdir()
        for i in range(files):
            (root / f"{i}.md").write_text(words(rng, 900), encoding="utf-8")
        memoir = await open_store(Path(tmp) / "m.db")
        memoir.tokens.count("warm up the encoding")
        started = time.perf_counter()
        report = await memoir.documents.add_paths([root], scope="bench")
        took = time.perf_counter() - started
        started = time.perf_counter()
        again = await memoir.documents.add_paths([root], scope="bench")
        unchanged = time.perf_counter() - started
        await memoir.close()
    print(
        f"add_paths with hash:384, {files} files / {report.chunks:,} chunks: {report.chunks / took:,.0f} chunks/s "
        f"({files / took:,.1f} files/s); re-run with nothing changed: {again.unchanged} unchanged in {unchanged:.2f} s"
    )


async def local_model(chunks: int) -> None:
    rng = random.Random(2)
    with tempfile.TemporaryDirectory() as tmp:
        memoir = await open_store(Path(tmp) / "m.db", "local")
        await memoir.embedder.ensure_loaded()
        texts = [words(rng, 150) for _ in range(chunks)]
        started = time.perf_counter()
        written = 0
        for i in range(0, len(texts), 10):
            report = await memoir.documents.add_text(
                "\n\n".join(texts[i : i + 10]), path=f"d/{i}.md", scope="bench"
            )
            written += report.chunks
        took = time.perf_counter() - started
        await memoir.close()
    print(
        f"add_text with the local MiniLM: {written} chunks in {took:.1f} s = {written / took:,.0f} chunks/s "
        f"(100k chunks would take ~{100_000 / (written / took) / 60:.0f} min; embedding dominates)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print("# bench_ingest")
    for size in (2_000,) if args.quick else (10_000, 100_000):
        await store_only(size)
    await pipeline(20 if args.quick else 100)
    await local_model(100 if args.quick else 400)


if __name__ == "__main__":
    anyio.run(main)
