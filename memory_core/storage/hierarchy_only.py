"""TRANSITIONAL: the store of a PostgreSQL or MySQL URL before those backends implement every
port. The category hierarchy opens its own tables from the URL; everything else says plainly
that it needs SQLite. Deleted when ``memory_core.storage.postgres`` / ``.mysql`` are stores.
"""

from __future__ import annotations

from typing import Any, NoReturn

from memory_core.errors import ConfigError
from memory_core.models import DoctorFinding
from memory_core.scope import DEFAULT_SCOPE_SCHEMA, ScopeSchema
from memory_core.storage.url import DatabaseURL

__all__ = ["HierarchyOnlyStore"]


class HierarchyOnlyStore:
    """A :class:`~memory_core.storage.ports.Store` stand-in that serves nothing itself."""

    def __init__(self, url: DatabaseURL) -> None:
        self._url = url

    @property
    def backend(self) -> Any:
        return self._url.backend

    @property
    def url(self) -> DatabaseURL:
        return self._url

    @property
    def scope_schema(self) -> ScopeSchema:
        return DEFAULT_SCOPE_SCHEMA

    @property
    def capabilities(self) -> frozenset[Any]:
        return frozenset()

    def _unavailable(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ConfigError(
            f"{self._url.backend} stores serve the category hierarchy only "
            f"(ingest / ask / categories) for now: {self._url.redacted()}",
            hint="use a sqlite:///path URL for documents, rules, stats and re-embedding",
        )

    async def open(self, *, create: bool = True) -> HierarchyOnlyStore:
        return self

    async def close(self) -> None:
        return None

    async def ensure_embedder(self, embedder_id: str, dimension: int) -> bool:
        return False

    async def diagnose(self, *, configured_embedder: str | None) -> list[DoctorFinding]:
        return []

    read = write = vector_search = similarities = prepare_vectors = _unavailable
    stats = reembed = compact = _unavailable
