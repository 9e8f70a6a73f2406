"""Value types of the document side: documents and chunks as stored, and a document to write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CHUNK_KIND", "DOC_KIND", "ChunkRecord", "DocRecord", "NewDocument"]

DOC_KIND = "document"
CHUNK_KIND = "chunk"


@dataclass(frozen=True, slots=True)
class NewDocument:
    """A document about to be written (its chunks travel beside it)."""

    doc_id: str
    scope: str
    path: str
    content_hash: str
    mtime: str | None
    size: int
    tags: tuple[str, ...] = ()
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DocRecord:
    """A stored document (a ``resource`` row of kind ``document``)."""

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
