"""Value types shared across memoir's core.

Hot-path values (items written by the thousand) are slotted dataclasses; values that cross a
boundary (CLI JSON, MCP structured output) are pydantic models defined next to their feature.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from memory_core.kinds import ItemKind, ResourceKind
    from memory_core.scope import Scope

__all__ = [
    "EMBED_TEXT_KEY",
    "Category",
    "DoctorFinding",
    "DoctorReport",
    "Edge",
    "Entity",
    "EventRecord",
    "Item",
    "ItemUpdate",
    "NewEntity",
    "NewItem",
    "NewResource",
    "Resource",
    "RunRecord",
    "ScoredId",
    "StoreHealth",
    "StoreStats",
    "Tombstone",
    "content_hash",
    "embedding_text",
    "stable_id",
    "utc_now",
]


def utc_now() -> str:
    """The current time as RFC 3339 UTC with microseconds (sorts lexically)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def content_hash(text: str) -> str:
    """sha256 of the UTF-8 text, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Item metadata key: the text an item's vector is made of when that is not the item's text
# (a directive is embedded with its rule title and heading, see memory_core.rules.graph).
EMBED_TEXT_KEY = "embed_text"


def embedding_text(text: str, metadata: dict[str, Any] | None) -> str:
    """What an item's vector is computed from: ``metadata[EMBED_TEXT_KEY]`` if set, else ``text``.

    Every path that embeds a stored item again (``reembed``, a restore under another embedder)
    goes through this, so it gives the vector a fresh ingest gives.
    """
    if metadata:
        embedded = metadata.get(EMBED_TEXT_KEY)
        if isinstance(embedded, str) and embedded:
            return embedded
    return text


def stable_id(*parts: object, length: int = 24) -> str:
    """A short, stable id derived from ``parts`` (same inputs, same id, in any process)."""
    digest = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode("utf-8"), digest_size=32)
    return digest.hexdigest()[:length]


@dataclass(frozen=True, slots=True)
class NewItem:
    """An item to write: a chunk, a directive, a memory… (DESIGN §2).

    ``uid`` is stable (derived from the input), so writing the same item twice is a no-op.
    """

    uid: str
    kind: ItemKind
    text: str
    token_count: int
    scope: Scope
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
    repeat_count: int = 0
    valid_from: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Item:
    """An item as stored (``scope`` is the stored :attr:`Scope.key`)."""

    item_id: int
    uid: str
    scope: str
    kind: ItemKind
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


_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class ItemUpdate:
    """Changes to one stored item; fields left at ``UNSET`` keep their value.

    Changing ``text`` or ``tags`` rewrites the item's lexical row in the same transaction;
    pass ``vector`` to replace its vector row too (a changed text without a vector drops the
    old vector, so the item is found lexically until it is re-embedded).
    """

    text: str = _UNSET
    token_count: int = _UNSET
    content_hash: str = _UNSET
    tags: tuple[str, ...] = _UNSET
    importance: float = _UNSET
    pinned: bool = _UNSET
    repeat_count: int = _UNSET
    simhash: int | None = _UNSET
    category_id: int | None = _UNSET
    valid_from: str | None = _UNSET
    valid_to: str | None = _UNSET
    superseded_by: int | None = _UNSET
    metadata: dict[str, Any] = _UNSET
    vector: Any = _UNSET  # np.ndarray of the store's dimension, or None to drop the vector

    def changes(self) -> dict[str, Any]:
        """The fields that were set (name -> new value)."""
        return {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if getattr(self, name) is not _UNSET
        }


@dataclass(frozen=True, slots=True)
class ScoredId:
    """One search arm's hit: an item id and that arm's score, higher is better.

    Lexical arms give a BM25 score (SQLite: ``-bm25(item_fts)``); vector arms give the cosine
    similarity.
    """

    item_id: int
    score: float


@dataclass(frozen=True, slots=True)
class NewResource:
    """A source to record: a document, a rule file, a conversation… (DESIGN §2)."""

    uid: str
    scope: Scope
    kind: ResourceKind
    uri: str
    content_hash: str
    mtime: str | None = None
    size: int | None = None
    tags: tuple[str, ...] = ()
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Resource:
    resource_id: int
    uid: str
    scope: str
    kind: ResourceKind
    uri: str
    content_hash: str
    mtime: str | None
    size: int | None
    tags: tuple[str, ...]
    source: str | None
    created_at: str
    updated_at: str
    deleted: bool
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NewEntity:
    """A graph node to ensure: found by ``(kind, key)`` within a scope, created if absent."""

    kind: str
    key: str  # the normalised name the entity is found by
    name: str  # as shown
    resource_id: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Entity:
    entity_id: int
    scope: str
    kind: str
    key: str
    name: str
    resource_id: int | None
    created_at: str
    metadata: dict[str, Any]


EndpointKind = Literal["entity", "item"]


@dataclass(frozen=True, slots=True, order=True)
class Edge:
    """A directed relation between two graph endpoints (entities or items)."""

    src_kind: EndpointKind
    src_id: int
    rel_type: str
    dst_kind: EndpointKind
    dst_id: int


@dataclass(frozen=True, slots=True)
class Category:
    """A node of the category tree (memoirAI categories and memory-layer categories)."""

    category_id: int
    scope: str
    parent_id: int | None
    level: int
    name: str
    created_at: str
    summary: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: int
    scope: str
    kind: str
    started_at: str
    took_ms: float | None
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EventRecord:
    event_id: int
    scope: str
    kind: str
    subject: str | None
    created_at: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Tombstone:
    tombstone_id: int
    scope: str
    kind: str
    uid: str
    deleted_at: str
    expires_at: str | None
    payload: dict[str, Any]


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
class StoreHealth:
    """Whether the open store can be trusted with writes: its file still is the one opened,
    and the last quick integrity check passed.

    ``status``: ``ok``; ``unchecked`` (the check ran out of its time budget: a large store);
    ``corrupt`` (writes refused); ``replaced`` (the file was deleted or replaced under the open
    store: writes refused, they would be lost); ``read_only`` (a read-only file system or no
    write permission: writes refused); ``unknown`` (a backend without these checks).
    """

    status: Literal["ok", "unchecked", "corrupt", "replaced", "read_only", "unknown"]
    detail: str = ""
    checked_at: str | None = None
    hint: str | None = None

    @property
    def writable(self) -> bool:
        return self.status in ("ok", "unchecked", "unknown")

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "detail": self.detail,
            "checked_at": self.checked_at,
            "hint": self.hint,
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
