"""The soft cap and retention (spec "Capacity Trimming", "Security & Privacy"). In a write tx.

Capacity: when a space holds more than its soft cap (200 by default), the entries with the
smallest cached totals (``last_scores.total = relevance + recency + importance``) are deleted
until it fits. Totals that are missing or older than ``scores_stale_hours`` are recomputed
first with the same recency decay, the stored importance and relevance 0. Pinned and
manually saved entries are never trimmed; when one of them *would* have been among the
victims, a ``trim_blocked`` event says so (the alert), and the protected entry stays.

The victims are found by ordering on the cached ``trim_key`` through the item port (an
indexed count first: a space under its cap pays one ``COUNT``), never by loading every entry.

Retention: unpinned entries older than ``retention_days`` are hard-deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory_core.filters import And, Compare, Not, all_of
from memory_core.kinds import MEMORY
from memory_core.memories.ranking import recency
from memory_core.memories.records import PROTECTED, memory_of, scores_payload, trim_key
from memory_core.models import ItemUpdate
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.storage.ports import Tx

__all__ = ["TrimOutcome", "apply_retention", "enforce_capacity", "refresh_stale_scores"]

_PAGE = 500
_KINDS = (MEMORY,)


@dataclass
class TrimOutcome:
    total_before: int = 0
    cap: int = 0
    trimmed: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # protected entries that would have gone
    rescored: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "total_before": self.total_before,
            "cap": self.cap,
            "trimmed": self.trimmed,
            "blocked": self.blocked,
            "rescored": self.rescored,
        }


def refresh_stale_scores(
    tx: Tx, scope: Scope, *, now: datetime, stale_hours: float, tau_days: float
) -> int:
    """Recompute ``last_scores`` where missing or stale (relevance 0); returns how many."""
    cutoff = (now - timedelta(hours=stale_hours)).isoformat(timespec="microseconds")
    stamp = now.isoformat(timespec="microseconds")
    stale = Not(Compare("item.meta.scores_at", ">=", cutoff))
    count = 0
    after = None
    while True:
        page = tx.items.find(scope, kinds=_KINDS, where=stale, order="id", after=after, limit=_PAGE)
        for item in page:
            memory = memory_of(item)
            rec = recency(memory.created_at, now, tau_days=tau_days)
            total = rec + memory.importance
            metadata = dict(item.metadata)
            metadata["last_scores"] = scores_payload(0.0, rec, memory.importance, total, stamp)
            metadata["scores_at"] = stamp
            metadata["trim_key"] = trim_key(total)
            tx.items.update(item.item_id, ItemUpdate(metadata=metadata))
            count += 1
        if len(page) < _PAGE:
            return count
        after = page[-1]


def enforce_capacity(
    tx: Tx,
    scope: Scope,
    *,
    cap: int,
    now: datetime,
    stale_hours: float,
    tau_days: float,
) -> TrimOutcome:
    """Trim ``scope`` to ``cap`` entries (see the module docstring)."""
    outcome = TrimOutcome(cap=cap)
    outcome.total_before = tx.items.count(scope, kinds=_KINDS)
    overage = outcome.total_before - cap
    if overage <= 0:
        return outcome
    outcome.rescored = refresh_stale_scores(
        tx, scope, now=now, stale_hours=stale_hours, tau_days=tau_days
    )
    lowest, _ = tx.items.select(scope, kinds=_KINDS, order_by="item.meta.trim_key", limit=overage)
    victims, _ = tx.items.select(
        scope, kinds=_KINDS, where=Not(PROTECTED), order_by="item.meta.trim_key", limit=overage
    )
    chosen = set(victims)
    uids = {i.item_id: i.uid for i in tx.items.get([*lowest, *victims], meta_keys=()).values()}
    outcome.blocked = [uids[i] for i in lowest if i not in chosen and i in uids]
    outcome.trimmed = [uids[i] for i in victims if i in uids]
    if victims:
        tx.items.delete(victims)
    return outcome


def apply_retention(tx: Tx, scope: Scope, *, now: datetime, retention_days: float) -> list[str]:
    """Hard-delete unpinned entries created more than ``retention_days`` ago; their ids."""
    if retention_days <= 0:
        return []
    cutoff = (now - timedelta(days=retention_days)).isoformat(timespec="microseconds")
    where = all_of(And((Compare("item.created_at", "<", cutoff), Compare("item.pinned", "=", 0))))
    gone: list[str] = []
    while True:
        page = tx.items.find(scope, kinds=_KINDS, where=where, limit=_PAGE, meta_keys=())
        if not page:
            return gone
        tx.items.delete([i.item_id for i in page])
        gone.extend(i.uid for i in page)
