"""The storage contract of the category hierarchy (memoirAI spec), for all three backends.

The hierarchy runs on SQLite (the shared store: chunks are ``item`` rows of kind
``hierarchy_chunk`` with FTS and vectors), PostgreSQL and MySQL/MariaDB (own tables, created on
first use). The services above only see this protocol and these values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memory_core.errors import InvalidInputError
from memory_core.scope import Scope

__all__ = [
    "CATEGORY_COLUMNS",
    "CHUNK_COLUMNS",
    "MAX_CATEGORY_NAME_CHARS",
    "RUN_COLUMNS",
    "Category",
    "HierarchyChunk",
    "HierarchyStore",
    "NewChunk",
    "category_from_row",
    "check_category_level",
    "check_category_name",
    "check_leaf_row",
    "check_parent_row",
    "chunk_from_row",
    "normalise_category_name",
    "run_from_row",
    "vector_blobs",
]

from memory_core.categories import (
    MAX_CATEGORY_NAME_CHARS,
    check_category_name,
    normalise_category_name,
)
from memory_core.models import Category


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

    @property
    def backend(self) -> str: ...

    async def open(self) -> HierarchyStore:
        """Connect and create tables and indexes if they do not exist (idempotent)."""
        ...

    async def close(self) -> None: ...

    async def categories(
        self, scope: Scope, *, parent_id: int | None, level: int | None = None
    ) -> list[Category]:
        """Children of ``parent_id`` (None: level-1 categories), ordered by name."""
        ...

    async def all_categories(self, scope: Scope) -> list[Category]: ...

    async def count_categories(self, scope: Scope) -> int: ...

    async def create_category(
        self, scope: Scope, *, parent_id: int | None, level: int, name: str
    ) -> Category:
        """Create, or return the existing category whose normalised name matches within the
        same parent (no twins). Level 1 has no parent; deeper levels need a parent one level up.

        Raises:
            InvalidInputError: the level/parent combination is invalid.
        """
        ...

    async def add_chunks(
        self,
        scope: Scope,
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
        scope: Scope,
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
        self, scope: Scope, kind: str, took_ms: float, payload: dict[str, Any]
    ) -> int: ...

    async def list_runs(
        self, scope: Scope, *, kind: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]: ...


# -- validation shared by the three backends (pure: rows in, errors out) --------------------


def check_category_level(level: int, parent_id: int | None, depth: int) -> None:
    if not 1 <= level <= depth:
        raise InvalidInputError(
            f"category level {level} is outside the hierarchy depth 1..{depth}",
            hint="classify from level 1 down to the configured hierarchy.depth",
        )
    if level == 1 and parent_id is not None:
        raise InvalidInputError(
            f"a level-1 category cannot have a parent (got parent_id={parent_id})",
            hint="pass parent_id=None for level 1",
        )
    if level > 1 and parent_id is None:
        raise InvalidInputError(
            f"a level-{level} category needs a parent at level {level - 1}",
            hint="pass the parent's category_id",
        )


def check_parent_row(row: Sequence[Any] | None, scope: str, parent_id: int, level: int) -> None:
    if row is None or row[0] != scope:
        raise InvalidInputError(
            f"parent category {parent_id} does not exist in scope {scope[:80]!r}",
            hint="create the parent first, in the same scope",
        )
    if int(row[1]) != level - 1:
        raise InvalidInputError(
            f"parent category {parent_id} is at level {row[1]}, not {level - 1}",
            hint=f"a level-{level} category needs a parent exactly one level up",
        )


def check_leaf_row(row: Sequence[Any] | None, scope: str, category_id: int, depth: int) -> None:
    if row is None or row[0] != scope:
        raise InvalidInputError(
            f"category {category_id} does not exist in scope {scope[:80]!r}",
            hint="classify the chunk first and link it to the leaf category returned",
        )
    if int(row[1]) != depth:
        raise InvalidInputError(
            f"category {category_id} is at level {row[1]}, not a leaf (depth {depth})",
            hint="chunks link only to leaf categories at the configured hierarchy.depth",
        )


def vector_blobs(vectors: Any | None, count: int) -> list[bytes | None]:
    """float32 bytes per chunk (the same layout sqlite-vec uses), or None without vectors."""
    if vectors is None:
        return [None] * count
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != count:
        raise InvalidInputError(
            f"got vectors of shape {array.shape} for {count} chunks",
            hint="pass one vector per chunk (an array of shape (n, dim))",
        )
    return [row.tobytes() for row in array]


# -- row converters: every backend selects these columns in this order ----------------------

CATEGORY_COLUMNS = "category_id, scope, parent_id, level, name, created_at, summary"
CHUNK_COLUMNS = "chunk_id, uid, category_id, text, token_count, content_hash, created_at"
RUN_COLUMNS = "run_id, scope, kind, started_at, took_ms, payload"


def category_from_row(row: Sequence[Any]) -> Category:
    """A :class:`Category` from a row of ``CATEGORY_COLUMNS``."""
    return Category(
        category_id=int(row[0]),
        scope=row[1],
        parent_id=None if row[2] is None else int(row[2]),
        level=int(row[3]),
        name=row[4],
        created_at=row[5],
        summary=row[6],
    )


def chunk_from_row(row: Sequence[Any]) -> HierarchyChunk:
    """A :class:`HierarchyChunk` from a row of ``CHUNK_COLUMNS``."""
    return HierarchyChunk(
        chunk_id=int(row[0]),
        uid=row[1],
        category_id=int(row[2]),
        text=row[3],
        token_count=int(row[4]),
        content_hash=row[5],
        created_at=row[6],
    )


def run_from_row(row: Sequence[Any]) -> dict[str, Any]:
    """A run record from a row of ``RUN_COLUMNS`` (payload is JSON text)."""
    return {
        "run_id": int(row[0]),
        "scope": row[1],
        "kind": row[2],
        "started_at": row[3],
        "took_ms": row[4],
        "payload": json.loads(row[5]),
    }
