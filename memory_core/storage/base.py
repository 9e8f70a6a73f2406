"""The storage interface every backend implements.

The SQLite backend (``memory_core.storage.sqlite``) is the default and the reference; the
PostgreSQL and MySQL backends implement the same protocol so the services above never know
which one they talk to. Methods return domain values from ``memory_core.models``, never rows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from memory_core.models import DoctorFinding, Item, NewItem, ScoredId, StoreStats

__all__ = ["Store"]


@runtime_checkable
class Store(Protocol):
    """A memoir store: items with lexical and vector indexes, plus the graph and log tables."""

    backend: str

    async def open(self, *, create: bool = True) -> Store: ...

    async def close(self) -> None: ...

    async def ensure_embedder(self, embedder_id: str, dimension: int) -> bool:
        """Record or check the embedder; raises EmbedderMismatchError on a mismatch."""
        ...

    async def add_items(
        self, items: Sequence[NewItem], vectors: np.ndarray | None = None
    ) -> list[int]:
        """Write items, their lexical rows and vector rows in one transaction (idempotent)."""
        ...

    async def delete_items(self, item_ids: Sequence[int]) -> int: ...

    async def get_items(self, item_ids: Sequence[int]) -> dict[int, Item]: ...

    async def lexical_search(
        self, match: str, *, scope: str | None, kinds: Sequence[str] | None = None, limit: int = 50
    ) -> list[ScoredId]: ...

    async def vector_search(
        self,
        query: np.ndarray,
        *,
        scope: str | None,
        kinds: Sequence[str] | None = None,
        k: int = 50,
    ) -> list[ScoredId]: ...

    async def stats(self) -> StoreStats: ...

    async def diagnose(self, *, configured_embedder: str | None) -> list[DoctorFinding]: ...

    async def reembed(
        self,
        embed: Callable[[list[str]], Awaitable[np.ndarray]],
        embedder_id: str,
        dimension: int,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Recompute every vector with ``embed`` and rebuild the lexical and vector indexes."""
        ...
