"""Value types shared across memoir's core.

Hot-path values (items written by the thousand) are slotted dataclasses; values that cross a
boundary (CLI JSON, MCP structured output) are pydantic models defined next to their feature.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = [
    "DoctorFinding",
    "DoctorReport",
    "Item",
    "NewItem",
    "ScoredId",
    "StoreStats",
    "content_hash",
    "stable_id",
    "utc_now",
]


def utc_now() -> str:
    """The current time as RFC 3339 UTC with microseconds (sorts lexically)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def content_hash(text: str) -> str:
    """sha256 of the UTF-8 text, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stable_id(*parts: object, length: int = 24) -> str:
    """A short, stable id derived from ``parts`` (same inputs, same id, in any process)."""
    digest = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode("utf-8"), digest_size=32)
    return digest.hexdigest()[:length]


@dataclass(frozen=True, slots=True)
class NewItem:
    """An item to write: a chunk, a directive, a memory… (DESIGN §2)."""

    uid: str
    kind: str
    text: str
    token_count: int
    scope: str = ""
    content_hash: str = ""
    resource_id: int | None = None
    category_id: int | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    start_line: int | None = None
    end_line: int | None = None
    simhash: int | None = None
    importance: float = 0.5
    pinned: bool = False
    tags: tuple[str, ...] = ()
    created_at: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Item:
    """An item as stored."""

    item_id: int
    uid: str
    scope: str
    kind: str
    text: str
    token_count: int
    content_hash: str
    resource_id: int | None
    category_id: int | None
    start_offset: int | None
    end_offset: int | None
    start_line: int | None
    end_line: int | None
    simhash: int | None
    importance: float
    pinned: bool
    repeat_count: int
    tags: tuple[str, ...]
    created_at: str
    updated_at: str
    valid_from: str | None
    valid_to: str | None
    superseded_by: int | None
    deleted: bool
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ScoredId:
    """One arm's hit: an item id with that arm's raw score (bm25, or cosine distance)."""

    item_id: int
    score: float


@dataclass(frozen=True)
class StoreStats:
    url: str
    backend: str
    file_bytes: int | None
    wal_bytes: int | None
    journal_mode: str | None
    schema_migrations: list[str]
    counts: dict[str, int]
    items_by_kind: dict[str, int]
    embedder_id: str | None
    embedding_dim: int | None
    vectors: int
    sqlite_version: str | None
    vec_version: str | None
    driver: str | None
    fts5: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "backend": self.backend,
            "file_bytes": self.file_bytes,
            "wal_bytes": self.wal_bytes,
            "journal_mode": self.journal_mode,
            "schema_migrations": self.schema_migrations,
            "counts": self.counts,
            "items_by_kind": self.items_by_kind,
            "embedder": {"id": self.embedder_id, "dimension": self.embedding_dim},
            "vectors": self.vectors,
            "sqlite_version": self.sqlite_version,
            "sqlite_vec_version": self.vec_version,
            "extension_loading": self.driver,
            "fts5": self.fts5,
        }


@dataclass(frozen=True)
class DoctorFinding:
    """One check of ``memoir doctor``: what was checked, the outcome, and the fix if it failed."""

    check: str
    status: Literal["ok", "warning", "error"]
    message: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class DoctorReport:
    findings: list[DoctorFinding]

    @property
    def ok(self) -> bool:
        return all(f.status != "error" for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"healthy": self.ok, "findings": [f.as_dict() for f in self.findings]}
