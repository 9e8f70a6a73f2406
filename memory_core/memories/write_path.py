"""``remember``: the spec's persist flow over the storage ports.

1. check the text; normalise it; its digest and SimHash (pure);
2. read: the space's settings (off or incognito: nothing is written), a forget tombstone for
   the digest (blocked for 24 h), a near-duplicate (Hamming <= 3, current entries);
3. no duplicate: classify (offline or the configured model), enrich, score importance, and
   summarise long text, outside any transaction;
4. write, in one transaction, re-checking 2: merge into the canonical entry, or insert the new
   one (``needs_embedding``) and supersede conflicting entries; record the events; enforce
   the soft cap; apply retention once a day.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from memory_core.errors import InvalidInputError
from memory_core.kinds import MEMORY
from memory_core.memories import capacity, controls
from memory_core.memories.conflicts import Conflict, find_conflicts
from memory_core.memories.enrich import clean_tags, enrich, extractive_summary
from memory_core.memories.importance import Classification, importance_score
from memory_core.memories.records import Memory, memory_of
from memory_core.memories.spaces import MemorySpace
from memory_core.memories.text import normalise, simhash64, text_digest
from memory_core.memories.writes import NewEntry, merge_plan, new_item, supersede_updates
from memory_core.retrieval.rewrite import rewrite_query
from memory_core.storage.ports import LexicalQuery

if TYPE_CHECKING:
    from memory_core.config import MemorySettings
    from memory_core.scope import Scope
    from memory_core.storage.ports import Tx

__all__ = [
    "OnConflict",
    "Prepared",
    "RememberRequest",
    "WriteOutcome",
    "check_request",
    "prepare",
    "rare_terms",
    "read_gate",
    "write",
]

OnConflict = Literal["supersede", "ask", "keep"]
_KINDS = (MEMORY,)
_MAX_SOURCE_IDS = 50
_MAX_SOURCE_CHARS = 300
TOMBSTONE_KIND = "memory"


@dataclass(frozen=True)
class RememberRequest:
    text: str
    role: str = "user"
    tags: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    created_at: str | None = None
    manually_saved: bool = False
    pin: bool = False
    session: str | None = None
    on_conflict: OnConflict = "supersede"
    anchor: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def check_request(request: RememberRequest, settings: MemorySettings) -> RememberRequest:
    """The request with cleaned tags and source ids.

    Raises:
        InvalidInputError: empty or too long text, a bad role, tag or source id.
    """
    text = request.text.strip()
    if not text:
        raise InvalidInputError("the memory text is empty", hint="pass the fact to remember")
    if len(text) > settings.max_text_chars:
        raise InvalidInputError(
            f"the memory text has {len(text)} characters, over the limit of "
            f"{settings.max_text_chars}",
            hint="save a shorter statement, or raise memories.max_text_chars",
        )
    if request.role not in ("user", "assistant", "system"):
        raise InvalidInputError(
            f"unknown role {request.role!r}", hint="use user, assistant or system"
        )
    sources = tuple(dict.fromkeys(s.strip() for s in request.source_ids if s.strip()))
    if len(sources) > _MAX_SOURCE_IDS or any(len(s) > _MAX_SOURCE_CHARS for s in sources):
        raise InvalidInputError(
            f"{len(sources)} source ids (at most {_MAX_SOURCE_IDS}, each under "
            f"{_MAX_SOURCE_CHARS} characters)",
            hint="pass references such as chat:123 or doc:abc, not contents",
        )
    if request.on_conflict not in ("supersede", "ask", "keep"):
        raise InvalidInputError(
            f"unknown on_conflict {request.on_conflict!r}", hint="use supersede, ask or keep"
        )
    return replace(request, text=text, tags=clean_tags(request.tags), source_ids=sources)


@dataclass(frozen=True)
class Gate:
    """What the read phase found."""

    state: controls.SpaceState
    blocked_until: str | None
    duplicate: Memory | None


def read_gate(tx: Tx, scope: Scope, digest: str, simhash: int, *, distance: int, now: str) -> Gate:
    state = controls.load_state(tx, scope)
    tomb = tx.tombstones.find(scope, TOMBSTONE_KIND, [digest], now=now).get(digest)
    near = [
        memory_of(i)
        for i in tx.items.near_simhash(scope, simhash, kinds=_KINDS, max_distance=distance)
    ]
    current = [m for m in near if m.current]
    return Gate(state, tomb.expires_at if tomb else None, current[0] if current else None)


@dataclass(frozen=True)
class Prepared:
    entry: NewEntry
    classification: Classification | None


def prepare(
    request: RememberRequest,
    space: MemorySpace,
    *,
    normalised: str,
    created_at: str,
    classification: Classification,
    settings: MemorySettings,
    count: Any,
    truncate: Any,
) -> NewEntry:
    """The new entry's derived fields (pure apart from the token counter)."""
    manually_saved = request.manually_saved or classification.explicit_save
    info = enrich(request.text, normalised, tags=request.tags, category=classification.category)
    base = importance_score(
        base=settings.base_importance,
        category=classification.category,
        manually_saved=manually_saved,
        metadata_confidence=info.metadata_confidence,
        has_metadata=bool(info.entities or info.keyphrases),
    )
    tokens = int(count(request.text))
    summary = None
    if tokens > settings.summary_tokens:
        summary = extractive_summary(
            request.text, max_tokens=settings.summary_tokens, count=count, truncate=truncate
        )
    return NewEntry(
        text=request.text,
        normalised=normalised,
        digest=text_digest(normalised),
        simhash=simhash64(normalised),
        token_count=tokens,
        role=request.role,
        tags=info.tags,
        source_ids=request.source_ids,
        created_at=created_at,
        manually_saved=manually_saved,
        pin=request.pin or classification.explicit_pin,
        category=classification.category,
        category_confidence=classification.confidence,
        importance_model=classification.model,
        base_importance=base,
        importance=base,
        metadata_confidence=info.metadata_confidence,
        entities=info.entities,
        keyphrases=info.keyphrases,
        summary=summary,
        user=space.user,
        space=space.space,
        anchor=request.anchor,
        extra=dict(request.extra),
    )


@dataclass
class WriteOutcome:
    status: Literal["created", "merged", "blocked", "skipped", "conflict"]
    memory: Memory | None = None
    reason: str | None = None
    superseded: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    trim: capacity.TrimOutcome | None = None
    retention: list[str] = field(default_factory=list)
    superseded_by_uid: str | None = None


def rare_terms(tx: Tx, terms: tuple[str, ...], *, keep: int = 4) -> tuple[str, ...]:
    """The ``keep`` rarest of ``terms`` that occur at all (the lexical index's cost model).

    Two memories about one subject share its distinctive words; the common ones cost the
    most to rank (an OR over a word in half the space scores half the space) and tell least.
    """
    rows = tx.lexical.term_rows(terms)
    present = sorted((n, t) for t, n in rows.items() if n > 0)
    return tuple(t for _, t in present[:keep])


def _conflict_candidates(tx: Tx, scope: Scope, text: str) -> list[tuple[int, str, str]]:
    terms = rare_terms(tx, rewrite_query(text).terms)
    if not terms:
        return []
    # Unfiltered, then current entries only: superseded ones are few, and a filtered lexical
    # search costs several times more (it must keep ranking until enough rows pass).
    hits = tx.lexical.search(LexicalQuery(terms, "OR"), scope, kinds=_KINDS, limit=20)
    items = tx.items.get([h.item_id for h in hits], meta_keys=())
    current = [items[h.item_id] for h in hits if h.item_id in items]
    return [(i.item_id, i.uid, i.text) for i in current if i.valid_to is None][:10]


def _merge(
    tx: Tx, scope: Scope, canonical: Memory, entry: NewEntry, settings: MemorySettings
) -> WriteOutcome:
    plan = merge_plan(
        canonical,
        entry,
        step=settings.repeat_boost,
        cap=settings.repeat_boost_cap,
        base_importance=settings.base_importance,
    )
    tx.items.update(canonical.item_id, plan.update)
    tx.log.record_event(
        scope,
        "merge",
        subject=canonical.memory_id,
        payload={
            "repeat_count": plan.repeat_count,
            "importance": plan.importance,
            "added_tags": list(plan.added_tags),
            "added_source_ids": list(plan.added_source_ids),
            "manually_saved": plan.manually_saved,
            "pinned": plan.pinned,
        },
    )
    merged = memory_of(tx.items.get([canonical.item_id])[canonical.item_id])
    return WriteOutcome("merged", merged)


def write(
    tx: Tx,
    scope: Scope,
    entry: NewEntry,
    request: RememberRequest,
    settings: MemorySettings,
    *,
    now: datetime,
    recency_now: float = 1.0,
) -> WriteOutcome:
    """The write transaction of one ``remember`` (re-checks what the read phase saw)."""
    stamp = now.isoformat(timespec="microseconds")
    gate = read_gate(
        tx, scope, entry.digest, entry.simhash, distance=settings.dedupe_distance, now=stamp
    )
    if not gate.state.memory_enabled:
        return WriteOutcome("skipped", reason="memory is turned off for this space")
    if gate.state.incognito(request.session):
        return WriteOutcome("skipped", reason="incognito session: nothing is saved")
    if gate.blocked_until is not None:
        tx.log.record_event(scope, "blocked", payload={"digest": entry.digest})
        return WriteOutcome(
            "blocked",
            reason=f"this text was forgotten recently; it can be saved again after "
            f"{gate.blocked_until}",
        )
    if gate.duplicate is not None:
        outcome = _merge(tx, scope, gate.duplicate, entry, settings)
    else:
        conflicts: list[Conflict] = []
        if settings.conflict_detection and request.on_conflict != "keep":
            conflicts = find_conflicts(entry.text, _conflict_candidates(tx, scope, entry.text))
        if conflicts and request.on_conflict == "ask":
            return WriteOutcome(
                "conflict",
                reason="this updates an existing memory; call again with "
                "on_conflict='supersede' to replace it or 'keep' to keep both",
                conflicts=conflicts,
            )
        if conflicts:
            entry = replace(
                entry, extra={**entry.extra, "supersedes": [c.memory_id for c in conflicts]}
            )
        queued = datetime.now(UTC).isoformat(timespec="microseconds")  # wall clock: backlog age
        item = new_item(entry, scope, now=stamp, recency_now=recency_now, queued_at=queued)
        item_id = tx.items.add([item])[0]
        for old_id, update in supersede_updates(
            [memory_of(i) for i in tx.items.get([c.item_id for c in conflicts]).values()],
            item_id,
            now=stamp,
        ):
            tx.items.update(old_id, update)
        for conflict in conflicts:
            tx.log.record_event(
                scope,
                "supersede",
                subject=conflict.memory_id,
                payload={"superseded_by": tx.items.get([item_id], meta_keys=())[item_id].uid,
                         "reason": conflict.reason},
            )  # fmt: skip
        created = memory_of(tx.items.get([item_id])[item_id])
        tx.log.record_event(
            scope,
            "remember",
            subject=created.memory_id,
            payload={
                "manually_saved": created.manually_saved,
                "pinned": created.pinned,
                "category": created.category,
                "importance": created.importance,
                "role": created.role,
            },
        )
        outcome = WriteOutcome(
            "created", created, superseded=[c.memory_id for c in conflicts], conflicts=conflicts
        )
    cap = gate.state.soft_cap or settings.soft_cap
    outcome.trim = capacity.enforce_capacity(
        tx,
        scope,
        cap=cap,
        now=now,
        stale_hours=settings.scores_stale_hours,
        tau_days=settings.tau_days,
    )
    _record_trim(tx, scope, outcome.trim)
    outcome.retention = _maybe_retention(tx, scope, gate.state, settings, now)
    if outcome.memory is not None and outcome.memory.memory_id in outcome.trim.trimmed:
        outcome.reason = "saved, then trimmed at once: its score is the lowest in a full space"
    elif outcome.memory is not None and outcome.memory.memory_id in outcome.retention:
        outcome.reason = (
            f"saved, then deleted at once by retention: created_at is more than "
            f"{settings.retention_days:g} days ago"
        )
    return outcome


def _record_trim(tx: Tx, scope: Scope, trim: capacity.TrimOutcome) -> None:
    if trim.trimmed:
        tx.log.record_event(
            scope, "trim", payload={"trimmed": trim.trimmed, "cap": trim.cap,
                                    "total_before": trim.total_before}
        )  # fmt: skip
    if trim.blocked:
        # The alert: a pinned or manually saved entry would have been trimmed.
        tx.log.record_event(
            scope, "trim_blocked", payload={"protected": trim.blocked, "cap": trim.cap}
        )


def _maybe_retention(
    tx: Tx, scope: Scope, state: controls.SpaceState, settings: MemorySettings, now: datetime
) -> list[str]:
    if settings.retention_days <= 0:
        return []
    stamp = now.isoformat(timespec="microseconds")
    due = (now - timedelta(days=1)).isoformat(timespec="microseconds")
    if state.last_retention_at is not None and state.last_retention_at > due:
        return []
    gone = capacity.apply_retention(tx, scope, now=now, retention_days=settings.retention_days)
    if gone:
        tx.log.record_event(scope, "retention", payload={"deleted": gone})
    fresh = controls.load_state(tx, scope)
    controls.save_state(tx, scope, replace(fresh, last_retention_at=stamp))
    return gone


def prepare_digest(text: str) -> tuple[str, str, int]:
    """The normalised text, its digest and its SimHash."""
    normalised = normalise(text)
    return normalised, text_digest(normalised), simhash64(normalised)
