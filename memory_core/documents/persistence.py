"""The document side over the storage ports: what a write or read of documents means.

Each function takes one transaction (:class:`~memory_core.storage.ports.Tx`) and runs inside
``store.read`` / ``store.write``: replacing a document (its old chunks with their lexical and
vector rows, the old resource, the new ones) is one callback, hence one transaction, so a reader
sees the old version or the new one, never a mix and never a stale chunk. No SQL here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np

from memory_core.documents.records import (
    CHUNK_KIND,
    DOC_KIND,
    ChunkRecord,
    DocRecord,
    NewDocument,
    chunk_record,
    doc_record,
)
from memory_core.filters import Compare
from memory_core.models import NewItem, NewResource
from memory_core.scope import Scope
from memory_core.storage.ports import ResourceUpdate, Tx

__all__ = [
    "chunks_by_ids",
    "document_chunks",
    "documents_by_ids",
    "find_documents",
    "iter_export",
    "live_document",
    "purge_tombstones",
    "replace_document",
    "tombstone_documents",
    "touch_document",
]

_PAGE = 1000


def live_document(tx: Tx, scope: Scope, path: str) -> DocRecord | None:
    """The live document stored for ``path`` in ``scope``, if any (the newest)."""
    found = tx.resources.find(scope, kinds=[DOC_KIND], uri=path)
    return doc_record(found[-1]) if found else None


def find_documents(
    tx: Tx, scope: Scope, *, doc_ids: Sequence[str] = (), paths: Sequence[str] = ()
) -> list[DocRecord]:
    """Live documents matching any of ``doc_ids`` (exact or unique prefix) or ``paths`` (a
    path matches the document itself or, for a folder, every document under it)."""
    found: dict[int, DocRecord] = {}
    for doc_id in doc_ids:
        for res in tx.resources.find(scope, kinds=[DOC_KIND], uid_prefix=doc_id):
            found[res.resource_id] = doc_record(res)
    for path in paths:
        folder = path.rstrip("/") + "/"
        for res in tx.resources.find(scope, kinds=[DOC_KIND], uri=path):
            found[res.resource_id] = doc_record(res)
        for res in tx.resources.find(scope, kinds=[DOC_KIND], uri_prefix=folder):
            found[res.resource_id] = doc_record(res)
    return sorted(found.values(), key=lambda d: (d.path, d.doc_id))


def _chunk_ids(tx: Tx, resource_id: int) -> list[int]:
    ids: list[int] = []
    after = None
    where = Compare("item.resource_id", "=", resource_id)
    while True:
        page = tx.items.find(None, where=where, order="offset", after=after, limit=_PAGE)
        ids.extend(i.item_id for i in page)
        if len(page) < _PAGE:
            return ids
        after = page[-1]


def replace_document(
    tx: Tx,
    doc: NewDocument,
    chunks: Sequence[NewItem],
    vectors: np.ndarray | None,
    *,
    force: bool = False,
) -> tuple[int, int]:
    """Write ``doc`` with its chunks, replacing the live version of its path.

    Re-checks inside the transaction, so two processes ingesting the same file cannot both
    insert it: an identical live version makes this a no-op (unless ``force``: the same text
    with new tags or source is rewritten, keeping its ids).

    Returns:
        ``(resource_id, chunks_removed)``; ``chunks_removed`` is -1 when the document was
        already stored unchanged.
    """
    existing = live_document(tx, doc.scope, doc.path)
    removed = 0
    if existing is not None:
        if existing.doc_id == doc.doc_id and not force:
            return existing.resource_id, -1
        removed = len(_chunk_ids(tx, existing.resource_id))
        tx.resources.delete([existing.resource_id])
    # A tombstoned earlier copy with the same id (removed, then added back) is replaced.
    stale = tx.resources.by_uid([doc.doc_id]).get(doc.doc_id)
    if stale is not None:
        tx.resources.delete([stale.resource_id])
    resource_id = tx.resources.add(
        NewResource(
            uid=doc.doc_id,
            scope=doc.scope,
            kind=DOC_KIND,
            uri=doc.path,
            content_hash=doc.content_hash,
            mtime=doc.mtime,
            size=doc.size,
            tags=doc.tags,
            source=doc.source,
            metadata=doc.metadata,
        )
    )
    tx.items.add([replace(c, resource_id=resource_id) for c in chunks], vectors)
    return resource_id, removed


def touch_document(tx: Tx, resource_id: int, mtime: str | None, size: int) -> None:
    """Record a new mtime and size for a document whose text did not change."""
    tx.resources.update(resource_id, ResourceUpdate(mtime=mtime, size=size))


def tombstone_documents(tx: Tx, scope: Scope, resource_ids: Sequence[int]) -> list[str]:
    """Remove documents: their chunks leave every index now; the documents stay as
    tombstones (``deleted``, plus a tombstone listing the chunk ids) until ``compact`` or
    ``rm --purge``.

    Returns:
        The removed document ids.
    """
    removed: list[str] = []
    resources = tx.resources.get(resource_ids)
    for resource_id in resource_ids:
        res = resources.get(resource_id)
        if res is None or res.deleted or res.scope != scope.key:
            continue
        ids = _chunk_ids(tx, resource_id)
        chunk_uids = [i.uid for i in tx.items.get(ids).values()]
        tx.items.delete(ids)
        tx.resources.update(resource_id, ResourceUpdate(deleted=True))
        tx.tombstones.add(
            scope, DOC_KIND, res.uid, payload={"path": res.uri, "chunks": sorted(chunk_uids)}
        )
        removed.append(res.uid)
    return removed


def purge_tombstones(tx: Tx, scope: Scope | None = None) -> dict[str, int]:
    """Drop tombstoned documents and their tombstones (every scope when ``scope`` is None)."""
    gone = [
        r.resource_id
        for r in tx.resources.find(scope, kinds=[DOC_KIND], include_deleted=True)
        if r.deleted
    ]
    tx.resources.delete(gone)  # normally chunk-less; a crash-era leftover goes with it
    purged = tx.tombstones.purge(scope, kinds=[DOC_KIND, CHUNK_KIND])
    return {"documents": len(gone), "tombstones": purged}


def documents_by_ids(tx: Tx, resource_ids: Sequence[int]) -> dict[int, DocRecord]:
    return {i: doc_record(r) for i, r in tx.resources.get(resource_ids).items()}


def chunks_by_ids(tx: Tx, item_ids: Sequence[int]) -> dict[int, ChunkRecord]:
    """Live chunks (with their live documents) by item id; other items are absent."""
    items = {i: it for i, it in tx.items.get(item_ids).items() if it.kind == CHUNK_KIND}
    docs = documents_by_ids(tx, [it.resource_id for it in items.values() if it.resource_id])
    return {
        i: chunk_record(it, docs[it.resource_id])
        for i, it in items.items()
        if not it.deleted and it.resource_id in docs and not docs[it.resource_id].deleted
    }


def document_chunks(tx: Tx, doc: DocRecord) -> list[ChunkRecord]:
    """A document's chunks in offset order."""
    ids = _chunk_ids(tx, doc.resource_id)
    items = tx.items.get(ids)
    return [chunk_record(items[i], doc) for i in ids if i in items]


def iter_export(tx: Tx, scope: Scope | None) -> Iterator[DocRecord]:
    """Every live document, ordered by (scope, path, id)."""
    for res in tx.resources.find(scope, kinds=[DOC_KIND]):
        yield doc_record(res)
