"""Value types of the document side: documents and chunks as stored, and a document to write.

Documents are resources of kind ``document`` and chunks are items of kind ``chunk``; these
records are their document-side views, built from the storage ports' values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_core.kinds import CHUNK, DOCUMENT
from memory_core.models import Item, Resource
from memory_core.scope import Scope

__all__ = [
    "CHUNK_KIND",
    "DOC_KIND",
    "ChunkRecord",
    "DocRecord",
    "NewDocument",
    "chunk_record",
    "doc_record",
]

DOC_KIND = DOCUMENT
CHUNK_KIND = CHUNK


@dataclass(frozen=True, slots=True)
class NewDocument:
    """A document about to be written (its chunks travel beside it)."""

    doc_id: str
    scope: Scope
    path: str
    content_hash: str
    mtime: str | None
    size: int
    tags: tuple[str, ...] = ()
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DocRecord:
    """A stored document (a resource of kind ``document``)."""

    resource_id: int
    doc_id: str
    scope: str
    path: str
    content_hash: str
    mtime: str | None
    size: int | None
    tags: tuple[str, ...]
    source: str | None
    created_at: str
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """A stored chunk with its document."""

    item_id: int
    chunk_id: str
    doc: DocRecord
    offset: int
    end_offset: int
    tokens: int
    text: str
    content_hash: str


def doc_record(resource: Resource) -> DocRecord:
    return DocRecord(
        resource_id=resource.resource_id,
        doc_id=resource.uid,
        scope=resource.scope,
        path=resource.uri,
        content_hash=resource.content_hash,
        mtime=resource.mtime,
        size=resource.size,
        tags=resource.tags,
        source=resource.source,
        created_at=resource.created_at,
        deleted=resource.deleted,
    )


def chunk_record(item: Item, doc: DocRecord) -> ChunkRecord:
    return ChunkRecord(
        item_id=item.item_id,
        chunk_id=item.uid,
        doc=doc,
        offset=int(item.start_offset or 0),
        end_offset=int(item.end_offset or 0),
        tokens=item.token_count,
        text=item.text,
        content_hash=item.content_hash,
    )
