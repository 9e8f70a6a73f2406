"""The write plan of one ``remember``: a new entry, or a merge into its canonical twin. Pure.

Spec ("Near-Duplicate Detection" and "Persist Flow"): when an entry of the same space lies
within Hamming distance 3 of the new text's SimHash, no row is created; the canonical entry
gets ``repeat_count + 1``, ``importance = clamp(base_importance + f(repeat_count))``, the
incoming tags and ``source_ids`` merged in, ``manually_saved`` OR-ed, and the pinning policy
applied, so the user's intent persists.

Pinning policy: an entry is pinned when the request asks for it (``pin=True``, or the text
says "pin this" / "always remember" / "never forget"). A merge never unpins; only
``unpin`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.kinds import MEMORY
from memory_core.memories.enrich import merge_unique
from memory_core.memories.importance import importance_score, repeat_boost
from memory_core.memories.records import Memory, flag, scores_payload, trim_key
from memory_core.models import ItemUpdate, NewItem, stable_id
from memory_core.scope import Scope

__all__ = ["MergePlan", "NewEntry", "merge_plan", "new_item", "pinning_policy", "supersede_updates"]


@dataclass(frozen=True)
class NewEntry:
    """Everything known about a memory before it is written."""

    text: str
    normalised: str
    digest: str
    simhash: int
    token_count: int
    role: str
    tags: tuple[str, ...]
    source_ids: tuple[str, ...]
    created_at: str
    manually_saved: bool
    pin: bool
    category: str
    category_confidence: float
    importance_model: str
    base_importance: float
    importance: float
    metadata_confidence: float
    entities: tuple[str, ...]
    keyphrases: tuple[str, ...]
    summary: str | None
    user: str
    space: str
    anchor: dict[str, Any] | None = None
    valid_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def pinning_policy(*, pinned: bool, requested: bool) -> bool:
    """Pinned stays pinned; a request to pin pins (see the module docstring)."""
    return pinned or requested


def new_item(
    entry: NewEntry,
    scope: Scope,
    *,
    now: str,
    recency_now: float = 1.0,
    queued_at: str | None = None,
) -> NewItem:
    """The item of a new entry, ``needs_embedding`` set, its first ``last_scores`` cached.

    ``last_scores`` at write time: relevance 0 (no query context), recency of its age at
    ``now`` (1 for a new entry), its importance (spec "Score Persistence").
    """
    total = recency_now + entry.importance
    metadata: dict[str, Any] = {
        "user": entry.user,
        "space": entry.space,
        "role": entry.role,
        "source_ids": list(entry.source_ids),
        "manually_saved": flag(entry.manually_saved),
        "needs_embedding": 1,
        "queued_at": queued_at or now,
        "metadata_confidence": entry.metadata_confidence,
        "entities": list(entry.entities),
        "keyphrases": list(entry.keyphrases),
        "category": entry.category,
        "category_confidence": entry.category_confidence,
        "importance_model": entry.importance_model,
        "base_importance": entry.base_importance,
        "digest": entry.digest,
        "last_scores": scores_payload(0.0, recency_now, entry.importance, total, now),
        "scores_at": now,
        "trim_key": trim_key(total),
        **entry.extra,
    }
    if entry.summary:
        metadata["summary"] = entry.summary
    if entry.anchor:
        metadata["anchor"] = entry.anchor
    return NewItem(
        uid=stable_id("memory", scope.key, entry.digest, entry.created_at),
        kind=MEMORY,
        text=entry.text,
        token_count=entry.token_count,
        scope=scope,
        simhash=entry.simhash,
        importance=entry.importance,
        pinned=pinning_policy(pinned=False, requested=entry.pin),
        tags=entry.tags,
        created_at=entry.created_at,
        valid_from=entry.valid_from or entry.created_at,
        metadata=metadata,
    )


@dataclass(frozen=True)
class MergePlan:
    update: ItemUpdate
    repeat_count: int
    importance: float
    pinned: bool
    manually_saved: bool
    added_tags: tuple[str, ...]
    added_source_ids: tuple[str, ...]


def merge_plan(
    canonical: Memory,
    entry: NewEntry,
    *,
    step: float,
    cap: float,
    base_importance: float,
) -> MergePlan:
    """How ``entry`` folds into its near-duplicate ``canonical`` (no new row)."""
    repeat = canonical.repeat_count + 1
    manually_saved = canonical.manually_saved or entry.manually_saved
    base = canonical.base_importance
    if manually_saved and not canonical.manually_saved:
        # The user's explicit save arrives with a repeat: the +0.5 now applies.
        base = importance_score(
            base=base_importance,
            category=canonical.category,
            manually_saved=True,
            metadata_confidence=canonical.metadata_confidence,
            has_metadata=bool(canonical.entities or canonical.keyphrases),
        )
    importance = round(min(1.0, max(0.0, base + repeat_boost(repeat, step=step, cap=cap))), 6)
    tags = merge_unique(canonical.tags, entry.tags)
    sources = merge_unique(canonical.source_ids, entry.source_ids)
    pinned = pinning_policy(pinned=canonical.pinned, requested=entry.pin)
    metadata = dict(canonical.metadata)
    metadata.update(
        {
            "source_ids": list(sources),
            "manually_saved": flag(manually_saved),
            "base_importance": base,
        }
    )
    if canonical.last_scores:
        # The cached total moves with the importance (the trim key must not lag behind).
        scores = dict(canonical.last_scores)
        scores["importance"] = importance
        scores["total"] = round(
            float(scores.get("relevance", 0.0)) + float(scores.get("recency", 0.0)) + importance,
            6,
        )
        metadata["last_scores"] = scores
        metadata["trim_key"] = trim_key(scores["total"])
    update = ItemUpdate(
        repeat_count=repeat, importance=importance, pinned=pinned, metadata=metadata
    )
    if tags != canonical.tags:  # a tag change rewrites the lexical row: only when needed
        update = ItemUpdate(
            repeat_count=repeat, importance=importance, pinned=pinned, metadata=metadata, tags=tags
        )
    return MergePlan(
        update=update,
        repeat_count=repeat,
        importance=importance,
        pinned=pinned,
        manually_saved=manually_saved,
        added_tags=tuple(t for t in tags if t not in canonical.tags),
        added_source_ids=tuple(s for s in sources if s not in canonical.source_ids),
    )


def supersede_updates(
    older: Sequence[Memory], new_item_id: int, *, now: str
) -> list[tuple[int, ItemUpdate]]:
    """The older entries a new one supersedes: closed at ``now`` and linked to it."""
    return [(m.item_id, ItemUpdate(valid_to=now, superseded_by=new_item_id)) for m in older]
