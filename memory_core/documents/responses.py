"""The Recall JSON shapes as pydantic models (CLI ``--json``, MCP structured output, Python).

``SearchResponse.to_json()`` drops ``None`` fields, as the spec asks ("fields not relevant to a
command are omitted"). Floats are rounded to 6 decimals so that identical inputs give
byte-identical output.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SCHEMA_VERSION",
    "AddReport",
    "ChunkOut",
    "ContextChunkOut",
    "ContextOut",
    "DocOut",
    "DocumentChange",
    "ExportReport",
    "ImportReport",
    "QueryInfo",
    "RemoveReport",
    "ResultOut",
    "SearchResponse",
    "StatsOut",
]

SCHEMA_VERSION = "1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """The spec's JSON object (``None`` fields omitted)."""
        return self.model_dump(exclude_none=True)


class QueryInfo(_Model):
    text: str | None = None
    rql: str | None = None
    filters: str | None = None
    limit: int
    offset: int = 0
    mode: str | None = None


class DocOut(_Model):
    id: str | None = None
    path: str | None = None
    mtime: str | None = None
    hash: str | None = None
    tag: str | None = None
    tags: list[str] | None = None
    source: str | None = None


class ChunkOut(_Model):
    id: str | None = None
    doc_id: str | None = None
    offset: int | None = None
    end_offset: int | None = None
    tokens: int | None = None
    text: str | None = None


class ResultOut(_Model):
    score: float | None = None
    doc: DocOut | None = None
    chunk: ChunkOut | None = None
    explain: dict[str, Any] | None = None


class ContextChunkOut(_Model):
    id: str
    doc_id: str
    offset: int
    end_offset: int
    tokens: int
    text: str
    path: str
    hash: str
    mtime: str | None = None
    truncated: bool = False


class ContextOut(_Model):
    text: str
    budget_tokens: int
    used_tokens: int
    chunks: list[ContextChunkOut]
    diversity: int | None = None


class StatsOut(_Model):
    took_ms: float
    total_hits: int
    snapshot: str = ""


class SearchResponse(_Model):
    """The response of ``search``, ``query`` and ``context``."""

    ok: bool = True
    schema_version: str = SCHEMA_VERSION
    query: QueryInfo
    results: list[ResultOut] | None = None
    context: ContextOut | None = None
    stats: StatsOut
    warnings: list[str] = Field(default_factory=list)
    next_offset: int | None = None
    explain: dict[str, Any] | None = None


class DocumentChange(_Model):
    path: str
    doc_id: str | None = None
    status: str  # added | updated | unchanged | skipped | removed
    chunks: int = 0
    tokens: int = 0
    reason: str | None = None


class AddReport(_Model):
    ok: bool = True
    schema_version: str = SCHEMA_VERSION
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    chunks: int = 0
    documents: list[DocumentChange] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)


class RemoveReport(_Model):
    ok: bool = True
    schema_version: str = SCHEMA_VERSION
    removed: list[DocumentChange] = Field(default_factory=list)
    purged: dict[str, int] | None = None
    warnings: list[str] = Field(default_factory=list)


class ExportReport(_Model):
    ok: bool = True
    schema_version: str = SCHEMA_VERSION
    documents: int
    chunks: int
    out: str | None = None


class ImportReport(_Model):
    ok: bool = True
    schema_version: str = SCHEMA_VERSION
    documents: int
    chunks: int
    unchanged: int = 0
    reembedded: bool = False
    warnings: list[str] = Field(default_factory=list)
