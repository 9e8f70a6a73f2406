"""Roll-ups: old, low-recency entries summarised per topic (spec "Stretch: aging and
summarization", "Periodic topic roll-ups to reduce storage while preserving provenance").

Candidates are current entries older than ``older_than_days`` that are neither pinned, saved
by hand, nor roll-ups themselves. They are grouped by their first tag; each group of at least
``min_group`` becomes one roll-up memory whose text is an extractive summary (the group's
sentences richest in its key words, within ``summary_tokens`` x 2), whose ``source_ids`` are
``memory:<id>`` of every original, and whose importance is the group's highest. The originals
are superseded by the roll-up (``valid_to``, ``superseded_by``): out of default recall, kept as
history until retention removes them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory_core.filters import And, Compare, Not
from memory_core.kinds import MEMORY
from memory_core.memories.enrich import extractive_summary, merge_unique
from memory_core.memories.records import CURRENT, PROTECTED, Memory, memory_of
from memory_core.memories.responses import RollupReport
from memory_core.memories.spaces import MemorySpace
from memory_core.memories.text import normalise, simhash64, text_digest
from memory_core.memories.writes import NewEntry, new_item
from memory_core.models import Item, ItemUpdate

if TYPE_CHECKING:
    from memory_core.config import MemorySettings
    from memory_core.context import CoreContext
    from memory_core.storage.ports import Tx

__all__ = ["run_rollup"]

_KINDS = (MEMORY,)
_PAGE = 500


async def run_rollup(
    ctx: CoreContext,
    pair: MemorySpace,
    settings: MemorySettings,
    *,
    older_than_days: float,
    min_group: int,
    now: datetime,
) -> RollupReport:
    scope = pair.scope
    cutoff = (now - timedelta(days=older_than_days)).isoformat(timespec="microseconds")
    stamp = now.isoformat(timespec="microseconds")
    where = And(
        (
            CURRENT,
            Not(PROTECTED),
            Compare("item.created_at", "<", cutoff),
            Not(Compare("item.meta.rollup", "=", 1)),
        )
    )

    def load(tx: Tx) -> list[Memory]:
        found: list[Memory] = []
        after: Item | None = None
        while True:
            page = tx.items.find(scope, kinds=_KINDS, where=where, after=after, limit=_PAGE)
            found.extend(memory_of(i) for i in page)
            if len(page) < _PAGE:
                return found
            after = page[-1]

    candidates = await ctx.store.read(load)
    groups: dict[str, list[Memory]] = {}
    for memory in candidates:
        groups.setdefault(memory.tags[0] if memory.tags else "general", []).append(memory)
    tokens = ctx.tokens
    plans: list[tuple[NewEntry, list[Memory]]] = []
    for topic, members in sorted(groups.items()):
        if len(members) < min_group:
            continue
        members.sort(key=lambda m: (m.created_at, m.item_id))
        body = " ".join(m.text.rstrip(".") + "." for m in members)
        summary = extractive_summary(
            body,
            max_tokens=settings.summary_tokens * 2,
            count=tokens.count,
            truncate=tokens.truncate,
        )
        text = f"Roll-up of {len(members)} memories about {topic}: {summary}"
        normalised = normalise(text)
        importance = max(m.importance for m in members)
        entry = NewEntry(
            text=text,
            normalised=normalised,
            digest=text_digest(normalised),
            simhash=simhash64(normalised),
            token_count=tokens.count(text),
            role="system",
            tags=merge_unique([topic, "rollup"], *(m.tags for m in members))[:8],
            source_ids=tuple(f"memory:{m.memory_id}" for m in members),
            created_at=stamp,
            manually_saved=False,
            pin=False,
            category="fact",
            category_confidence=1.0,
            importance_model="rollup",
            base_importance=importance,
            importance=importance,
            metadata_confidence=max(m.metadata_confidence for m in members),
            entities=merge_unique(*(m.entities for m in members))[:20],
            keyphrases=merge_unique(*(m.keyphrases for m in members))[:10],
            summary=None,
            user=pair.user,
            space=pair.space,
            valid_from=members[0].created_at,
            extra={"rollup": 1, "supersedes": [m.memory_id for m in members]},
        )
        plans.append((entry, members))

    def write(tx: Tx) -> list[dict[str, Any]]:
        made: list[dict[str, Any]] = []
        for entry, members in plans:
            live = tx.items.get([m.item_id for m in members], meta_keys=())
            if len(live) != len(members):
                continue  # changed meanwhile: try again next time
            item_id = tx.items.add([new_item(entry, scope, now=stamp)])[0]
            for member in members:
                tx.items.update(member.item_id, ItemUpdate(valid_to=stamp, superseded_by=item_id))
            uid = tx.items.get([item_id], meta_keys=())[item_id].uid
            tx.log.record_event(
                scope, "rollup", subject=uid, payload={"sources": [m.memory_id for m in members]}
            )
            made.append({"id": uid, "topic": entry.tags[0], "sources": list(entry.source_ids)})
        return made

    made = await ctx.store.write(write) if plans else []
    return RollupReport(rollups=made, archived=sum(len(r["sources"]) for r in made))
