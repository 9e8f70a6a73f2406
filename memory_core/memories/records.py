"""How a memory is stored: an item of kind ``memory`` plus typed metadata (DESIGN §2).

The spec's ``memory_entries`` columns map onto the one item table; the memory-specific ones
live in the item's metadata under the keys below. Flags that filters compare (``manually_saved``,
``needs_embedding``, ``rollup``) are stored as 0/1 numbers, so every backend compares them the
same way; ``trim_key`` is the cached total as a fixed-width string, so ordering by it is numeric
on every backend (SQLite ``json_extract``, PostgreSQL ``->>``).

| spec field | stored as |
| --- | --- |
| id | ``item.uid`` (24 hex characters, stable across export / import) |
| user_id, space | the item's scope (:mod:`memory_core.memories.spaces`) and ``user`` / ``space`` |
| role, source_ids, metadata_confidence, manually_saved, needs_embedding, last_scores | metadata |
| text, created_at, simhash, repeat_count, tags, importance, pinned | item columns |
| embedding | the item's vector row |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from memory_core.filters import Compare, Filter, Not, Or
from memory_core.models import Item

__all__ = [
    "CURRENT",
    "NEEDS_EMBEDDING",
    "PROTECTED",
    "Memory",
    "Role",
    "flag",
    "memory_of",
    "scores_payload",
    "trim_key",
]

Role = Literal["user", "assistant", "system"]

# Filters over the stored shape (compiled by every backend).
CURRENT: Filter = Not(Compare("item.valid_to", ">", ""))  # valid_to IS NULL: not superseded
NEEDS_EMBEDDING: Filter = Compare("item.meta.needs_embedding", "=", 1)
PROTECTED: Filter = Or(
    (Compare("item.pinned", "=", 1), Compare("item.meta.manually_saved", "=", 1))
)


def flag(value: bool) -> int:
    return 1 if value else 0


def trim_key(total: float) -> str:
    """``total`` as a string whose text order is its numeric order (totals are >= 0)."""
    return f"{max(0.0, total):017.8f}"


def scores_payload(
    relevance: float, recency: float, importance: float, total: float, computed_at: str
) -> dict[str, Any]:
    """The spec's ``last_scores``: the four floats and an ISO 8601 ``computed_at``."""
    return {
        "relevance": round(relevance, 6),
        "recency": round(recency, 6),
        "importance": round(importance, 6),
        "total": round(total, 6),
        "computed_at": computed_at,
    }


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored memory, read from its item."""

    item_id: int
    memory_id: str
    scope: str
    text: str
    role: str
    tags: tuple[str, ...]
    source_ids: tuple[str, ...]
    created_at: str
    updated_at: str
    importance: float
    base_importance: float
    pinned: bool
    manually_saved: bool
    repeat_count: int
    needs_embedding: bool
    simhash: int | None
    token_count: int
    metadata_confidence: float
    category: str
    entities: tuple[str, ...]
    keyphrases: tuple[str, ...]
    summary: str | None
    last_scores: dict[str, Any] | None
    valid_from: str | None
    valid_to: str | None
    superseded_by: int | None
    supersedes: tuple[str, ...]
    anchor: dict[str, Any] | None
    rollup: bool
    metadata: dict[str, Any]

    @property
    def current(self) -> bool:
        return self.valid_to is None


def memory_of(item: Item) -> Memory:
    meta = item.metadata
    return Memory(
        item_id=item.item_id,
        memory_id=item.uid,
        scope=item.scope,
        text=item.text,
        role=str(meta.get("role", "user")),
        tags=item.tags,
        source_ids=tuple(meta.get("source_ids", ())),
        created_at=item.created_at,
        updated_at=item.updated_at,
        importance=item.importance,
        base_importance=float(meta.get("base_importance", item.importance)),
        pinned=item.pinned,
        manually_saved=bool(meta.get("manually_saved", 0)),
        repeat_count=item.repeat_count,
        needs_embedding=bool(meta.get("needs_embedding", 0)),
        simhash=item.simhash,
        token_count=item.token_count,
        metadata_confidence=float(meta.get("metadata_confidence", 0.0)),
        category=str(meta.get("category", "fact")),
        entities=tuple(meta.get("entities", ())),
        keyphrases=tuple(meta.get("keyphrases", ())),
        summary=meta.get("summary"),
        last_scores=meta.get("last_scores"),
        valid_from=item.valid_from,
        valid_to=item.valid_to,
        superseded_by=item.superseded_by,
        supersedes=tuple(meta.get("supersedes", ())),
        anchor=meta.get("anchor"),
        rollup=bool(meta.get("rollup", 0)),
        metadata=meta,
    )
