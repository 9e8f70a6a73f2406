"""Bulk loading of the benchmark corpus: memoir's own write path, fast enough for 100k-1M chunks.

A corpus of ``(document, chunks, vectors)`` batches goes through the same call the ingest uses
(``persistence.replace_document``: resource row, item rows, lexical rows and term statistics,
vector rows, generation stamps), so the rows are the ones memoir writes; what changes is only
how the work is grouped:

* SQLite: the write path itself (``replace_document`` per document), many documents per
  transaction (``docs_per_tx``) instead of one;
* PostgreSQL: the rows memoir's repositories would insert, by ``COPY``: resource rows as
  ``resources.add`` writes them, item rows from the write path's own row builder
  (``new_item_row``, documents in order, each document's chunks in uid order, so item ids come
  out the same), the lexical rows and BM25 term statistics by the write path's own
  ``lexical_add`` once per transaction (per document, the term-statistics upsert rewrites the
  same few thousand counter rows again and again: ~20 ms a document), vectors as pgvector's
  binary format. The HNSW index is dropped for the load and built once after it, with
  ``maintenance_work_mem`` raised (an HNSW insert per row costs milliseconds at 100k rows), from
  its own definition (``pg_indexes.indexdef``), so it is the index memoir created. The vector
  generation is bumped once per transaction instead of once per document (a cache stamp only).

:func:`store_fingerprint` reads back what a search depends on (items, lexical rows, term
statistics, vectors) so a bench can assert that a bulk-loaded store and one built a document
per transaction hold the same rows (``bench_pg.py`` does, on a small corpus, on both backends;
``tests/storage/test_bulk_load.py`` too).
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memory_core.documents import persistence
from memory_core.documents.records import DOC_KIND, NewDocument
from memory_core.models import NewItem, utc_now
from memory_core.storage.ports import Store

Batch = tuple[NewDocument, list[NewItem], np.ndarray]

__all__ = ["Batch", "build_per_document", "bulk_build", "store_fingerprint"]

HNSW_INDEX = "item_vec_hnsw"


async def build_per_document(store: Store, batches: Sequence[Batch]) -> float:
    """One transaction per document, as ``memoir add`` writes them; seconds taken."""
    started = time.perf_counter()
    for doc, items, vectors in batches:
        await store.write(
            lambda tx, d=doc, i=items, v=vectors: persistence.replace_document(tx, d, i, v)  # type: ignore[misc]
        )
    return time.perf_counter() - started


async def bulk_build(
    store: Store, batches: Sequence[Batch], *, docs_per_tx: int = 2000, progress: bool = False
) -> dict[str, float]:
    """Load ``batches`` through the write path, ``docs_per_tx`` documents per transaction.

    Returns:
        Seconds per phase: ``load`` (rows) and ``index`` (the HNSW build on PostgreSQL, 0 on
        SQLite), and ``total``.
    """
    pg = _pg_database(store)
    indexdef = None
    if pg is not None:
        if any(it.simhash is not None for _, items, _ in batches for it in items):
            raise ValueError("bulk_build loads chunks without a SimHash (band rows not written)")
        indexdef = pg.run_sync(_drop_hnsw, write=True)
    started = time.perf_counter()
    for start in range(0, len(batches), docs_per_tx):
        group = batches[start : start + docs_per_tx]
        if progress and start:
            took = time.perf_counter() - started
            print(
                f"    loaded {start:,}/{len(batches):,} documents in {took:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        if pg is not None:
            pg.run_sync(lambda conn, group=group: _pg_copy(conn, group), write=True)
            continue

        def write(tx: Any, group: Sequence[Batch] = group) -> None:
            for doc, items, vectors in group:
                persistence.replace_document(tx, doc, items, vectors)

        await store.write(write)
    loaded = time.perf_counter()
    if pg is not None and indexdef is not None:
        if progress:
            print(
                f"    rows loaded in {loaded - started:.0f} s; building HNSW "
                "(progress: pg_stat_progress_create_index)",
                file=sys.stderr,
                flush=True,
            )
        pg.run_sync(lambda conn: _create_hnsw(conn, indexdef), write=True)
        pg.run_sync(lambda conn: conn.execute("ANALYZE"), write=True, snapshot=False)
    done = time.perf_counter()
    return {"load": loaded - started, "index": done - loaded, "total": done - started}


def _pg_database(store: Store) -> Any:
    from memory_core.storage.postgres.store import PgStore

    return store.db if isinstance(store, PgStore) else None


def _pg_copy(conn: Any, group: Sequence[Batch]) -> None:
    from memory_core.storage.postgres.items import bump_vector_generation, lexical_add
    from memory_core.storage.server.items import INSERT_COLUMNS, new_item_row

    now = utc_now()
    uids = [doc.doc_id for doc, _, _ in group]
    known = conn.execute("SELECT count(*) FROM resource WHERE uid = ANY(%s)", (uids,)).fetchone()
    if known and known[0]:
        raise ValueError("bulk_build loads into an empty store only (a document is stored)")
    with conn.cursor().copy(f"COPY {_RESOURCE_COLUMNS} FROM STDIN") as copy:
        for doc, _, _ in group:
            copy.write_row(_resource_row(doc, now))
    resource_ids = dict(
        conn.execute("SELECT uid, resource_id FROM resource WHERE uid = ANY(%s)", (uids,))
    )
    # The per-document path's order: documents in turn, each one's chunks in uid order.
    ordered = [
        (replace(items[i], resource_id=resource_ids[doc.doc_id]), vectors[i])
        for doc, items, vectors in group
        for i in sorted(range(len(items)), key=lambda i, items=items: items[i].uid)
    ]
    with conn.cursor().copy(f"COPY {INSERT_COLUMNS} FROM STDIN") as copy:
        for item, _ in ordered:
            copy.write_row(new_item_row(item, now))
    item_ids = dict(
        conn.execute(
            "SELECT uid, item_id FROM item WHERE uid = ANY(%s)", ([it.uid for it, _ in ordered],)
        )
    )
    ids = [int(item_ids[it.uid]) for it, _ in ordered]
    lexical_add(conn, ids)
    with conn.cursor().copy(
        "COPY item_vec (item_id, scope, kind, embedding) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.write(_binary_vector_rows(ids, ordered))
    bump_vector_generation(conn, {it.scope.key for it, _ in ordered})


_RESOURCE_COLUMNS = (
    "resource (uid, scope, kind, uri, content_hash, mtime, size, tags, source, "
    "created_at, updated_at, metadata)"
)


def _resource_row(doc: NewDocument, now: str) -> tuple[Any, ...]:
    """The row ``resources.add`` writes for the resource ``replace_document`` makes of ``doc``."""
    return (
        doc.doc_id,
        doc.scope.key,
        DOC_KIND,
        doc.path,
        doc.content_hash,
        doc.mtime,
        doc.size,
        json.dumps(list(doc.tags), ensure_ascii=False),
        doc.source,
        now,
        now,
        json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True),
    )


def _binary_vector_rows(ids: Sequence[int], ordered: Sequence[tuple[NewItem, np.ndarray]]) -> bytes:
    """COPY BINARY rows of item_vec: int8 id, text scope, text kind, pgvector's binary vector
    (uint16 dimension, uint16 0, big-endian float32s: what ``PgVector`` sends)."""
    out = [b"PGCOPY\n\xff\r\n\x00", struct.pack(">ii", 0, 0)]
    for item_id, (item, vector) in zip(ids, ordered, strict=True):
        scope, kind = item.scope.key.encode(), item.kind.encode()
        array = np.asarray(vector, dtype=np.float32).reshape(-1)
        body = struct.pack(">HH", array.shape[0], 0) + array.astype(">f4").tobytes()
        out.append(
            struct.pack(">hiq", 4, 8, item_id)
            + struct.pack(">i", len(scope))
            + scope
            + struct.pack(">i", len(kind))
            + kind
            + struct.pack(">i", len(body))
            + body
        )
    out.append(struct.pack(">h", -1))
    return b"".join(out)


def _drop_hnsw(conn: Any) -> str | None:
    row = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'item_vec' AND indexname = %s",
        (HNSW_INDEX,),
    ).fetchone()
    if row is None:
        return None
    conn.execute(f"DROP INDEX {HNSW_INDEX}")
    return str(row[0])


def _create_hnsw(conn: Any, indexdef: str) -> None:
    # The graph of 1M 384-dim vectors needs a few GB to be built in memory (else it spills
    # and slows down many times); both cores build it.
    conn.execute("SET LOCAL maintenance_work_mem = '4GB'")
    conn.execute("SET LOCAL max_parallel_maintenance_workers = 1")
    conn.execute(indexdef)


async def store_fingerprint(store: Store) -> dict[str, str]:
    """Digests of the rows a search reads (ids included: ties rank by id), independent of
    counter slots and write times.

    Keys: ``indexes`` (PostgreSQL: every index definition), ``resources``, ``items`` (uid, scope, kind, text, hash, offsets, tokens, tags, metadata, document
    uri), ``lexical`` (per item uid: the lexical row), ``terms`` (per term: the summed count),
    ``stats`` (summed rows and tokens), ``vectors`` (per item uid: the float32 bytes).
    """
    pg = _pg_database(store)
    if pg is not None:
        return dict(pg.run_sync(_pg_fingerprint, write=False))
    from memory_core.storage.sqlite.store import SqliteStore

    assert isinstance(store, SqliteStore)
    return dict(await store.db.read(_sqlite_fingerprint))


_RESOURCE_SQL = (
    "SELECT resource_id, uid, scope, kind, uri, content_hash, mtime, size, tags, source, metadata "
    "FROM resource ORDER BY uid"
)
_ITEM_SQL = (
    "SELECT item.item_id, item.resource_id, item.uid, item.scope, item.kind, item.text, item.content_hash, item.start_offset, "
    "item.end_offset, item.token_count, item.tags, item.metadata, resource.uri "
    "FROM item LEFT JOIN resource ON resource.resource_id = item.resource_id ORDER BY item.uid"
)


def _digest(rows: Any) -> str:
    h = hashlib.sha256()
    for row in rows:
        h.update(repr(tuple(row)).encode())
    return h.hexdigest()


def _pg_fingerprint(conn: Any) -> dict[str, str]:
    return {
        "indexes": _digest(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                "ORDER BY indexname"
            )
        ),
        "resources": _digest(conn.execute(_RESOURCE_SQL)),
        "items": _digest(conn.execute(_ITEM_SQL)),
        "lexical": _digest(
            conn.execute(
                "SELECT item.uid, l.tsv::text, l.length, l.scope, l.kind, l.deleted "
                "FROM item_lexical l "
                "JOIN item ON item.item_id = l.item_id ORDER BY item.uid"
            )
        ),
        "terms": _digest(
            conn.execute(
                "SELECT term, sum(rows) FROM lexical_term GROUP BY term "
                "HAVING sum(rows) <> 0 ORDER BY term"
            )
        ),
        "stats": _digest(conn.execute("SELECT sum(rows), sum(tokens) FROM lexical_stats")),
        "vectors": _digest(
            (uid, np.asarray(v, dtype=np.float32).tobytes())
            for uid, v in conn.execute(
                "SELECT item.uid, v.embedding FROM item_vec v "
                "JOIN item ON item.item_id = v.item_id ORDER BY item.uid"
            )
        ),
    }


def _sqlite_fingerprint(conn: Any) -> dict[str, str]:
    from memory_core.storage.sqlite.items import VEC_TABLE

    return {
        "resources": _digest(conn.execute(_RESOURCE_SQL)),
        "items": _digest(conn.execute(_ITEM_SQL)),
        "lexical": _digest(
            conn.execute(
                "SELECT item.uid, f.text, f.tags FROM item_fts f "
                "JOIN item ON item.item_id = f.rowid ORDER BY item.uid"
            )
        ),
        "vectors": _digest(
            conn.execute(
                f"SELECT item.uid, v.embedding FROM {VEC_TABLE} v "
                "JOIN item ON item.item_id = v.item_id ORDER BY item.uid"
            )
        ),
    }
