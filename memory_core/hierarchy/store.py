"""The storage contract of the category hierarchy (memoirAI spec), for all three backends.

The hierarchy runs on SQLite (the shared store: chunks are ``item`` rows of kind
``hierarchy_chunk`` with FTS and vectors), PostgreSQL and MySQL/MariaDB (own tables, created on
first use). The services above only see this protocol and these values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Category", "HierarchyChunk", "HierarchyStore", "NewChunk", "normalise_category_name"]


def normalise_category_name(name: str) -> str:
    """Casefold and fold whitespace, so "Databases" and " databases " are the same category."""
    return " ".join(name.split()).casefold()


@dataclass(frozen=True, slots=True)
class Category:
    category_id: int
    scope: str
    parent_id: int | None
    level: int
    name: str
    created_at: str
    summary: str | None = None


@dataclass(frozen=True, slots=True)
class NewChunk:
    uid: str  # stable: derived from scope + content hash (re-ingesting the same text is a no-op)
    text: str
    token_count: int
    content_hash: str
    created_at: str
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HierarchyChunk:
    chunk_id: int
    uid: str
    category_id: int
    text: str
    token_count: int
    content_hash: str
    created_at: str


@runtime_checkable
class HierarchyStore(Protocol):
    """Categories, chunks linked to leaf categories, and query-run records, per scope."""

    backend: str

    async def open(self) -> HierarchyStore:
        """Connect and create tables and indexes if they do not exist (idempotent)."""
        ...

    async def close(self) -> None: ...

    async def categories(
        self, scope: str, *, parent_id: int | None, level: int | None = None
    ) -> list[Category]:
        """Children of ``parent_id`` (None: level-1 categories), ordered by name."""
        ...

    async def all_categories(self, scope: str) -> list[Category]: ...

    async def count_categories(self, scope: str) -> int: ...

    async def create_category(
        self, scope: str, *, parent_id: int | None, level: int, name: str
    ) -> Category:
        """Create, or return the existing category whose normalised name matches within the
        same parent (no twins). Level 1 has no parent; deeper levels need a parent one level up.

        Raises:
            InvalidInputError: the level/parent combination is invalid.
        """
        ...

    async def add_chunks(
        self,
        scope: str,
        category_id: int,
        chunks: Sequence[NewChunk],
        vectors: Any | None = None,
    ) -> list[int]:
        """Link chunks to a leaf category (idempotent on ``uid``); returns chunk ids.

        Raises:
            InvalidInputError: ``category_id`` is not a leaf at the configured depth.
        """
        ...

    async def chunks_in_category(
        self,
        scope: str,
        category_id: int,
        *,
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[HierarchyChunk]:
        """Chunks of one category in the spec's order: created_at ascending, then uid;
        ``after`` = (created_at, uid) of the last chunk already read (keyset pagination, so the
        caller can stop reading exactly at a token budget)."""
        ...

    async def record_run(
        self, scope: str, kind: str, took_ms: float, payload: dict[str, Any]
    ) -> int: ...

    async def list_runs(
        self, scope: str, *, kind: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]: ...
