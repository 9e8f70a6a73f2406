"""Stored memories as public views (:class:`~memory_core.memories.responses.MemoryView`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory_core.memories.anchors import AnchorCheck
from memory_core.memories.records import Memory
from memory_core.memories.responses import AnchorView, MemoryView
from memory_core.memories.spaces import MemorySpace

if TYPE_CHECKING:
    from memory_core.storage.ports import Tx

__all__ = ["anchor_view", "linked_uids", "memory_view"]


def anchor_view(memory: Memory, check: AnchorCheck | None) -> AnchorView | None:
    if not memory.anchor:
        return None
    anchor = memory.anchor
    view = AnchorView(
        path=str(anchor["path"]),
        start_line=int(anchor["start_line"]),
        end_line=int(anchor["end_line"]),
        commit=anchor.get("commit"),
    )
    if check is not None:
        view.status = check.status
        view.reason = check.reason
        if check.status == "moved":
            view.now_start_line, view.now_end_line = check.start_line, check.end_line
    return view


def linked_uids(tx: Tx, memories: Sequence[Memory]) -> dict[int, str]:
    """uids of the entries the given ones were superseded by (item id -> uid)."""
    ids = {m.superseded_by for m in memories if m.superseded_by is not None}
    if not ids:
        return {}
    return {i: item.uid for i, item in tx.items.get(sorted(ids), meta_keys=()).items()}


def memory_view(
    memory: Memory,
    space: MemorySpace,
    *,
    superseded_by: str | None = None,
    anchor: AnchorCheck | None = None,
) -> MemoryView:
    return MemoryView(
        id=memory.memory_id,
        user=space.user,
        space=space.space,
        role=memory.role,
        text=memory.text,
        summary=memory.summary,
        tags=list(memory.tags),
        source_ids=list(memory.source_ids),
        created_at=memory.created_at,
        updated_at=memory.updated_at,
        importance=memory.importance,
        pinned=memory.pinned,
        manually_saved=memory.manually_saved,
        repeat_count=memory.repeat_count,
        needs_embedding=memory.needs_embedding,
        simhash=None if memory.simhash is None else f"{memory.simhash:016x}",
        metadata_confidence=memory.metadata_confidence,
        category=memory.category,
        entities=list(memory.entities),
        keyphrases=list(memory.keyphrases),
        last_scores=memory.last_scores,
        valid_from=memory.valid_from,
        valid_to=memory.valid_to,
        superseded_by=superseded_by,
        supersedes=list(memory.supersedes),
        anchor=anchor_view(memory, anchor),
        rollup=memory.rollup,
    )
