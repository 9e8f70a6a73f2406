"""SQL of the document side: documents are ``resource`` rows, chunks are ``item`` rows.

Plain functions over a DB-API connection, run through ``SqliteDatabase.read`` / ``.write``.
Replacing a document (its old chunks with their FTS and vector rows, the old resource row,
the new ones) is one function, hence one transaction: a reader sees the old version or the
new one, never a mix, and never a stale chunk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memory_core.documents.records import (
    CHUNK_KIND,
    DOC_KIND,
    ChunkRecord,
    DocRecord,
    NewDocument,
)
from memory_core.models import NewItem, utc_now
from memory_core.storage.sqlite import items as item_sql
from memory_core.storage.sqlite.doc_vectors import bump_generation

__all__ = [
    "chunks_by_ids",
    "document_counts",
    "document_findings",
    "documents_by_ids",
    "find_documents",
    "iter_export_rows",
    "live_document",
    "purge_tombstones",
    "replace_document",
    "snapshot",
    "tombstone_documents",
    "touch_document",
    "vectors_for",
]

_DOC_COLUMNS = (
    "resource.resource_id, resource.uid, resource.scope, resource.uri, resource.content_hash, "
    "resource.mtime, resource.size, resource.tags, resource.source, resource.created_at, "
    "resource.deleted"
)


def _doc(row: Sequence[Any]) -> DocRecord:
    return DocRecord(
        resource_id=int(row[0]),
        doc_id=str(row[1]),
        scope=str(row[2]),
        path=str(row[3]),
        content_hash=str(row[4]),
        mtime=row[5],
        size=row[6],
        tags=tuple(json.loads(row[7])),
        source=row[8],
        created_at=str(row[9]),
        deleted=bool(row[10]),
    )


def live_document(conn: Any, scope: str, path: str) -> DocRecord | None:
    """The live document stored for ``path`` in ``scope``, if any."""
    row = conn.execute(
        f"SELECT {_DOC_COLUMNS} FROM resource WHERE scope = ? AND kind = ? AND uri = ? "
        "AND deleted = 0 ORDER BY resource_id DESC LIMIT 1",
        (scope, DOC_KIND, path),
    ).fetchone()
    return _doc(row) if row else None


def find_documents(
    conn: Any, scope: str, *, doc_ids: Sequence[str] = (), paths: Sequence[str] = ()
) -> list[DocRecord]:
    """Live documents matching any of ``doc_ids`` (exact or unique prefix) or ``paths``.

    A path matches the document itself or, for a folder, every document under it.
    """
    found: dict[int, DocRecord] = {}
    base = f"SELECT {_DOC_COLUMNS} FROM resource WHERE scope = ? AND kind = ? AND deleted = 0"
    for doc_id in doc_ids:
        rows = conn.execute(
            base + " AND (uid = ? OR substr(uid, 1, ?) = ?)",
            (scope, DOC_KIND, doc_id, len(doc_id), doc_id),
        ).fetchall()
        for row in rows:
            found[int(row[0])] = _doc(row)
    for path in paths:
        folder = path.rstrip("/") + "/"
        rows = conn.execute(
            base + " AND (uri = ? OR substr(uri, 1, ?) = ?)",
            (scope, DOC_KIND, path, len(folder), folder),
        ).fetchall()
        for row in rows:
            found[int(row[0])] = _doc(row)
    return sorted(found.values(), key=lambda d: (d.path, d.doc_id))


def _chunk_item_ids(conn: Any, resource_id: int) -> list[int]:
    return [
        int(r[0])
        for r in conn.execute("SELECT item_id FROM item WHERE resource_id = ?", (resource_id,))
    ]


def replace_document(
    conn: Any,
    doc: NewDocument,
    chunks: Sequence[NewItem],
    vectors: np.ndarray | None,
    *,
    force: bool = False,
) -> tuple[int, int]:
    """Write ``doc`` with its chunks, replacing the live version of its path (one transaction).

    Re-checks inside the transaction, so two processes ingesting the same file cannot both
    insert it: an identical live version makes this a no-op (unless ``force``: same text with
    new tags or source is rewritten, keeping its ids).

    Returns:
        ``(resource_id, chunks_removed)``; ``chunks_removed`` is -1 when the document was
        already stored unchanged.
    """
    existing = live_document(conn, doc.scope, doc.path)
    removed = 0
    if existing is not None:
        if existing.doc_id == doc.doc_id and not force:
            return existing.resource_id, -1
        old_ids = _chunk_item_ids(conn, existing.resource_id)
        removed = item_sql.delete_items(conn, old_ids)
        conn.execute("DELETE FROM resource WHERE resource_id = ?", (existing.resource_id,))
    # A tombstoned earlier copy with the same id (removed, then added back) is replaced.
    stale = conn.execute("SELECT resource_id FROM resource WHERE uid = ?", (doc.doc_id,)).fetchone()
    if stale is not None:
        item_sql.delete_items(conn, _chunk_item_ids(conn, int(stale[0])))
        conn.execute("DELETE FROM resource WHERE resource_id = ?", (int(stale[0]),))
    now = utc_now()
    cursor = conn.execute(
        "INSERT INTO resource (uid, scope, kind, uri, content_hash, mtime, size, tags, source, "
        "created_at, updated_at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            doc.doc_id,
            doc.scope,
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
        ),
    )
    resource_id = int(cursor.lastrowid)
    bound = [replace(c, resource_id=resource_id) for c in chunks]
    item_sql.insert_items(conn, bound, vectors)
    bump_generation(conn)
    return resource_id, removed


def touch_document(conn: Any, resource_id: int, mtime: str | None, size: int) -> None:
    """Record a new mtime and size for a document whose text did not change."""
    conn.execute(
        "UPDATE resource SET mtime = ?, size = ? WHERE resource_id = ?", (mtime, size, resource_id)
    )


def tombstone_documents(conn: Any, scope: str, resource_ids: Sequence[int]) -> list[str]:
    """Remove documents: their chunks leave every index now; the document rows stay as
    tombstones (``deleted = 1`` plus a ``tombstone`` row listing the chunk ids) until
    ``compact`` or ``rm --purge``.

    Returns:
        The removed document ids.
    """
    removed: list[str] = []
    now = utc_now()
    for resource_id in resource_ids:
        row = conn.execute(
            "SELECT uid, uri FROM resource WHERE resource_id = ? AND scope = ? AND deleted = 0",
            (resource_id, scope),
        ).fetchone()
        if row is None:
            continue
        chunk_uids = [
            str(r[0])
            for r in conn.execute(
                "SELECT uid FROM item WHERE resource_id = ? ORDER BY start_offset", (resource_id,)
            )
        ]
        item_sql.delete_items(conn, _chunk_item_ids(conn, resource_id))
        conn.execute(
            "UPDATE resource SET deleted = 1, updated_at = ? WHERE resource_id = ?",
            (now, resource_id),
        )
        conn.execute(
            "INSERT INTO tombstone (scope, kind, uid, deleted_at, payload) VALUES (?,?,?,?,?)",
            (
                scope,
                DOC_KIND,
                row[0],
                now,
                json.dumps({"path": row[1], "chunks": chunk_uids}, ensure_ascii=False),
            ),
        )
        removed.append(str(row[0]))
    if removed:
        bump_generation(conn)
    return removed


def purge_tombstones(conn: Any, scope: str | None = None) -> dict[str, int]:
    """Drop tombstoned documents and their tombstone rows (all scopes when ``scope`` is None)."""
    where, params = ("scope = ? AND ", [scope]) if scope is not None else ("", [])
    ids = [
        int(r[0])
        for r in conn.execute(
            f"SELECT resource_id FROM resource WHERE {where}kind = ? AND deleted = 1",
            [*params, DOC_KIND],
        )
    ]
    for resource_id in ids:  # normally none left; a crash-era leftover must not block the delete
        item_sql.delete_items(conn, _chunk_item_ids(conn, resource_id))
    if ids:
        bump_generation(conn)
    conn.executemany("DELETE FROM resource WHERE resource_id = ?", [(i,) for i in ids])
    before = conn.total_changes
    conn.execute(
        f"DELETE FROM tombstone WHERE {where}kind IN (?, ?)", [*params, DOC_KIND, CHUNK_KIND]
    )
    return {"documents": len(ids), "tombstones": int(conn.total_changes - before)}


def chunks_by_ids(conn: Any, item_ids: Sequence[int]) -> dict[int, ChunkRecord]:
    """Chunks (with their documents) by item id; items that are not live chunks are absent."""
    found: dict[int, ChunkRecord] = {}
    ids = list(dict.fromkeys(int(i) for i in item_ids))
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        rows = conn.execute(
            "SELECT item.item_id, item.uid, item.start_offset, item.end_offset, "
            f"item.token_count, item.text, item.content_hash, {_DOC_COLUMNS} "
            "FROM item JOIN resource ON resource.resource_id = item.resource_id "
            f"WHERE item.item_id IN ({marks}) AND item.deleted = 0 AND resource.deleted = 0",
            batch,
        )
        for row in rows:
            found[int(row[0])] = ChunkRecord(
                item_id=int(row[0]),
                chunk_id=str(row[1]),
                offset=int(row[2] or 0),
                end_offset=int(row[3] or 0),
                tokens=int(row[4]),
                text=str(row[5]),
                content_hash=str(row[6]),
                doc=_doc(row[7:]),
            )
    return found


def documents_by_ids(conn: Any, resource_ids: Sequence[int]) -> dict[int, DocRecord]:
    found: dict[int, DocRecord] = {}
    ids = list(dict.fromkeys(int(i) for i in resource_ids))
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        for row in conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM resource WHERE resource_id IN ({marks})", batch
        ):
            found[int(row[0])] = _doc(row)
    return found


def vectors_for(conn: Any, item_ids: Sequence[int]) -> tuple[list[int], np.ndarray | None]:
    """The stored vectors of ``item_ids`` (ids without a vector are left out)."""
    dimension = item_sql.vector_table_dimension(conn)
    if dimension is None:
        return [], None
    ids: list[int] = []
    blobs: list[bytes] = []
    unique = list(dict.fromkeys(int(i) for i in item_ids))
    for start in range(0, len(unique), 500):
        batch = unique[start : start + 500]
        marks = ",".join("?" * len(batch))
        for item_id, blob in conn.execute(
            f"SELECT item_id, embedding FROM {item_sql.VEC_TABLE} WHERE item_id IN ({marks})",
            batch,
        ):
            ids.append(int(item_id))
            blobs.append(bytes(blob))
    if not ids:
        return [], np.zeros((0, dimension), dtype=np.float32)
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), dimension)
    return ids, matrix


def iter_export_rows(
    conn: Any, scope: str | None, batch: int = 256
) -> Iterator[tuple[DocRecord, list[ChunkRecord]]]:
    """Every live document with its chunks, ordered by (scope, path, offset)."""
    where, params = ("AND scope = ? ", [scope]) if scope is not None else ("", [])
    docs = [
        _doc(r)
        for r in conn.execute(
            f"SELECT {_DOC_COLUMNS} FROM resource WHERE kind = ? AND deleted = 0 {where}"
            "ORDER BY scope, uri, uid",
            [DOC_KIND, *params],
        )
    ]
    for start in range(0, len(docs), batch):
        group = docs[start : start + batch]
        for doc in group:
            ids = [
                int(r[0])
                for r in conn.execute(
                    "SELECT item_id FROM item WHERE resource_id = ? AND kind = ? AND deleted = 0 "
                    "ORDER BY start_offset, uid",
                    (doc.resource_id, CHUNK_KIND),
                )
            ]
            chunks = chunks_by_ids(conn, ids)
            yield doc, [chunks[i] for i in ids if i in chunks]


def document_counts(conn: Any, scope: str | None) -> dict[str, Any]:
    """Documents, chunks, tokens, tombstones and the snapshot (max mtime) of a scope."""
    where, params = ("AND scope = ? ", [scope]) if scope is not None else ("", [])
    docs, size, snapshot = conn.execute(
        "SELECT count(*), coalesce(sum(size), 0), max(mtime) FROM resource "
        f"WHERE kind = ? AND deleted = 0 {where}",
        [DOC_KIND, *params],
    ).fetchone()
    chunks, tokens = conn.execute(
        "SELECT count(*), coalesce(sum(token_count), 0) FROM item "
        f"WHERE kind = ? AND deleted = 0 {where}",
        [CHUNK_KIND, *params],
    ).fetchone()
    tombstoned = conn.execute(
        f"SELECT count(*) FROM resource WHERE kind = ? AND deleted = 1 {where}",
        [DOC_KIND, *params],
    ).fetchone()[0]
    return {
        "documents": int(docs),
        "chunks": int(chunks),
        "tokens": int(tokens),
        "bytes": int(size),
        "tombstoned_documents": int(tombstoned),
        "snapshot": snapshot or "",
    }


def snapshot(conn: Any, scope: str | None) -> str:
    """The spec's ``stats.snapshot``: the newest ``doc.mtime`` (empty for an empty store)."""
    where, params = ("AND scope = ? ", [scope]) if scope is not None else ("", [])
    row = conn.execute(
        f"SELECT max(mtime) FROM resource WHERE kind = ? AND deleted = 0 {where}",
        [DOC_KIND, *params],
    ).fetchone()
    return str(row[0] or "")


def document_findings(conn: Any) -> dict[str, int]:
    """Counts that should be zero in a healthy document store."""
    return {
        "chunks_without_document": int(
            conn.execute(
                "SELECT count(*) FROM item WHERE kind = ? AND (resource_id IS NULL OR "
                "resource_id NOT IN (SELECT resource_id FROM resource))",
                (CHUNK_KIND,),
            ).fetchone()[0]
        ),
        "chunks_of_removed_documents": int(
            conn.execute(
                "SELECT count(*) FROM item JOIN resource USING (resource_id) "
                "WHERE item.kind = ? AND resource.deleted = 1",
                (CHUNK_KIND,),
            ).fetchone()[0]
        ),
        "duplicate_live_paths": int(
            conn.execute(
                "SELECT count(*) FROM (SELECT scope, uri FROM resource WHERE kind = ? AND "
                "deleted = 0 GROUP BY scope, uri HAVING count(*) > 1)",
                (DOC_KIND,),
            ).fetchone()[0]
        ),
        "documents_without_chunks": int(
            conn.execute(
                "SELECT count(*) FROM resource WHERE kind = ? AND deleted = 0 AND size > 0 AND "
                "resource_id NOT IN (SELECT resource_id FROM item WHERE resource_id IS NOT NULL)",
                (DOC_KIND,),
            ).fetchone()[0]
        ),
        "tombstoned_documents": int(
            conn.execute(
                "SELECT count(*) FROM resource WHERE kind = ? AND deleted = 1", (DOC_KIND,)
            ).fetchone()[0]
        ),
    }
