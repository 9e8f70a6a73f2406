"""``MemoryService``: the agent-memory side of the facade (``memoir.memories``).

Every method takes the ``space`` (a namespace, e.g. a project scope) and optionally the
``user`` (default: ``memories.default_user``), and maps to one of the spec's operations, so the
REST endpoints, the CLI commands and the MCP tools are each one call:

| spec | method |
| --- | --- |
| ``GET /summary`` | :meth:`summary` |
| ``GET /entries`` (pinned / manually_saved filters) | :meth:`entries` |
| ``POST /entries`` | :meth:`remember` |
| ``POST`` / ``DELETE /entries/:id/pin`` | :meth:`pin` / :meth:`unpin` |
| ``DELETE /entries/:id`` (24 h tombstone) | :meth:`forget` |
| ``POST /settings`` | :meth:`update_settings` (and :meth:`settings` to read) |
| ``POST /incognito/start`` / ``end`` | :meth:`incognito_start` / :meth:`incognito_end` |
| search with explain, history | :meth:`recall`, :meth:`history`, :meth:`show` |
| telemetry | :meth:`stats`; the worker: :meth:`backfill` |
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.filters import And, Compare, Filter, all_of
from memory_core.kinds import MEMORY
from memory_core.memories import controls, recall, transfer
from memory_core.memories.anchors import capture_anchor, check_anchor
from memory_core.memories.backfill import run_backfill
from memory_core.memories.importance import ModelClassifier, classify_offline
from memory_core.memories.ranking import parse_time, recency
from memory_core.memories.records import CURRENT, Memory, memory_of
from memory_core.memories.responses import (
    BackfillReport,
    ConflictView,
    EntryPage,
    ExportReport,
    ForgetResult,
    ImportReport,
    MemoryStats,
    MemorySummary,
    MemoryView,
    RecallResult,
    RememberResult,
    RollupReport,
    SettingsView,
)
from memory_core.memories.rollup import run_rollup
from memory_core.memories.spaces import MemorySpace
from memory_core.memories.telemetry import space_stats
from memory_core.memories.views import linked_uids, memory_view
from memory_core.memories.write_path import (
    TOMBSTONE_KIND,
    OnConflict,
    RememberRequest,
    check_request,
    prepare,
    prepare_digest,
    read_gate,
    write,
)
from memory_core.models import Item, ItemUpdate

if TYPE_CHECKING:
    from memory_core.config import MemorySettings
    from memory_core.context import CoreContext
    from memory_core.memories.graph_compat import OfficialGraph
    from memory_core.storage.ports import Tx

__all__ = ["MemoryService", "as_moment"]

_KINDS = (MEMORY,)
_MAX_LIST = 500


def as_moment(now: datetime | str | None) -> datetime:
    """``now`` as an aware UTC datetime (None: the current time).

    Raises:
        InvalidInputError: a string that is not ISO 8601.
    """
    if now is None:
        return datetime.now(UTC)
    if isinstance(now, datetime):
        return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    try:
        return parse_time(now)
    except ValueError as exc:
        raise InvalidInputError(
            f"{now!r} is not an ISO 8601 time", hint="use e.g. 2026-05-01T09:30:00Z"
        ) from exc


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


class MemoryService:
    """The agent's memories over one open store (see the module docstring).

    Args:
        ctx: the facade's context (store, embedder, tokens, settings).
        importance_model: a pydantic-ai model (or provider string) that classifies new
            memories instead of the offline classifier (``memories.importance_model``).
    """

    def __init__(self, ctx: CoreContext, *, importance_model: Any = None) -> None:
        self._ctx = ctx
        model = importance_model
        if model is None and ctx.settings.memories.importance_model != "offline":
            model = ctx.settings.memories.importance_model
        self._classifier = None if model is None else ModelClassifier(model)
        # Memories queued while the model loads (or left queued by an earlier process) are
        # embedded by the first calls once the model is ready: one batch per call.
        self._backlog_due = True

    @property
    def settings_(self) -> MemorySettings:
        return self._ctx.settings.memories

    def space(self, space: str, user: str | None = None) -> MemorySpace:
        """The validated (user, space) pair.

        Raises:
            InvalidInputError: an empty or malformed user or space.
        """
        return MemorySpace(user or self.settings_.default_user, space)

    # -- the write path -------------------------------------------------------------------

    async def remember(
        self,
        text: str,
        *,
        space: str,
        user: str | None = None,
        role: str = "user",
        tags: Sequence[str] = (),
        source_ids: Sequence[str] = (),
        created_at: datetime | str | None = None,
        manually_saved: bool = False,
        pin: bool = False,
        session: str | None = None,
        on_conflict: OnConflict = "supersede",
        anchor: dict[str, Any] | None = None,
        workspace: str | Path | None = None,
        now: datetime | str | None = None,
        embed_now: bool | None = None,
    ) -> RememberResult:
        """Save a memory: merged into a near-duplicate if one exists, else a new entry.

        Args:
            text: the fact, preference, decision or commitment.
            space, user: where it belongs.
            role: who said it (user, assistant, system).
            tags, source_ids: labels and provenance references (e.g. ``chat:42``).
            created_at: when it was said (default ``now``).
            manually_saved: the user explicitly asked to save it (+0.5 importance).
            pin: the user asked to pin it (never trimmed).
            session: the caller's session (incognito sessions save nothing).
            on_conflict: when it updates an older memory about the same subject:
                ``supersede`` (default; the older one is kept as history), ``ask`` (write
                nothing, return the conflict), ``keep`` (keep both current).
            anchor: ``{"path", "start_line", "end_line"}`` of the code it is about, relative
                to ``workspace`` (default: the project folder of a ``project:`` space).
            now: the current time (tests and replays).
            embed_now: embed the new entry right away (default ``memories.embed_on_write``);
                otherwise it waits for :meth:`backfill`.

        Raises:
            InvalidInputError: empty or too long text, a bad role, tag, source id or time.
            PathNotAllowedError, NotFoundError: an anchor outside the project or unreadable.
        """
        pair = self.space(space, user)
        scope = pair.scope
        settings = self.settings_
        moment = as_moment(now)
        created = _stamp(as_moment(created_at)) if created_at is not None else _stamp(moment)
        if anchor is not None:
            root = self._root(pair, workspace)
            if root is None:
                raise InvalidInputError(
                    "a code anchor needs the project folder",
                    hint="pass workspace=… (or --workspace), or use a project:/path space",
                )
            anchor = capture_anchor(
                root, str(anchor["path"]), int(anchor["start_line"]), anchor.get("end_line")
            )
        request = check_request(
            RememberRequest(
                text=text,
                role=role,
                tags=tuple(tags),
                source_ids=tuple(source_ids),
                created_at=created,
                manually_saved=manually_saved,
                pin=pin,
                session=controls.check_session(session),
                on_conflict=on_conflict,
                anchor=anchor,
            ),
            settings,
        )
        normalised, digest, simhash = prepare_digest(request.text)
        stamp = _stamp(moment)
        gate = await self._ctx.store.read(
            lambda tx: read_gate(
                tx, scope, digest, simhash, distance=settings.dedupe_distance, now=stamp
            )
        )
        warnings: list[str] = []
        if gate.duplicate is None and gate.state.memory_enabled and gate.blocked_until is None:
            classification = (
                await self._classifier.classify(request.text)
                if self._classifier is not None
                else classify_offline(request.text)
            )
            if classification.warning:
                warnings.append(classification.warning)
        else:
            classification = classify_offline(request.text)  # unused by a merge or a skip
        tokens = self._ctx.tokens
        entry = prepare(
            request,
            pair,
            normalised=normalised,
            created_at=created,
            classification=classification,
            settings=settings,
            count=tokens.count,
            truncate=tokens.truncate,
        )
        entry_recency = recency(created, moment, tau_days=settings.tau_days)
        await self._drain_backlog()  # before the write: an entry saved embed_now=False waits
        outcome = await self._ctx.store.write(
            lambda tx: write(
                tx,
                scope,
                entry,
                request,
                settings,
                now=moment,
                recency_now=entry_recency,
            )
        )
        result = RememberResult(
            status=outcome.status,
            reason=outcome.reason,
            superseded=outcome.superseded,
            conflicts=[
                ConflictView(id=c.memory_id, text=c.text, reason=c.reason)
                for c in outcome.conflicts
            ],
            trimmed=outcome.trim.trimmed if outcome.trim else [],
            trim_blocked=outcome.trim.blocked if outcome.trim else [],
            warnings=warnings,
            user=pair.user,
            space=pair.space,
        )
        memory = outcome.memory
        gone = {*result.trimmed, *outcome.retention}
        if memory is not None and memory.memory_id not in gone:
            embed = settings.embed_on_write if embed_now is None else embed_now
            if outcome.status == "created" and embed:
                report = await self._embed_now(memory)
                result.warnings.extend(report.warnings)
            result.memory = await self._view(pair, memory.memory_id)
        return result

    async def _embed_now(self, memory: Memory) -> BackfillReport:
        if not self._ctx.embedder.is_ready():
            # A server still loading its model answers now; the backfill embeds later.
            self._backlog_due = True
            self._ctx.embedder.start_loading()
            return BackfillReport(
                warnings=["the embedding model is still loading: this memory is queued "
                          "(needs_embedding) and found by keywords until it is embedded"]
            )  # fmt: skip
        return await run_backfill(
            self._ctx, self.settings_, item_ids=[memory.item_id], max_batches=1
        )

    async def _drain_backlog(self) -> None:
        """Embed one batch of the queue once the model is ready, while the queue lasts.

        Without this a memory saved while the server loaded its model stayed without a vector
        (found by keywords only) until someone ran ``memoir memory backfill``.
        """
        if not self._backlog_due or not self._ctx.embedder.is_ready():
            return
        self._backlog_due = False  # set before the await: concurrent calls do not repeat it
        report = await run_backfill(self._ctx, self.settings_, max_batches=1)
        # A failing embedder is left to the CLI worker rather than retried on every call.
        self._backlog_due = report.remaining > 0 and report.failed == 0

    # -- reading --------------------------------------------------------------------------

    async def recall(
        self,
        query: str,
        *,
        space: str,
        user: str | None = None,
        k: int | None = None,
        budget_tokens: int | None = None,
        now: datetime | str | None = None,
        session: str | None = None,
        include_history: bool = False,
        workspace: str | Path | None = None,
        explain: bool = False,
    ) -> RecallResult:
        """The memories most useful for ``query``: hybrid search, RRF, tri-score, MMR, packed
        into ``budget_tokens`` and grouped by tag (see :mod:`memory_core.memories.recall`).

        Args:
            k: how many entries at most (default ``memories.top_n``, the spec's 8-16).
            budget_tokens: the context's hard token budget (default ``memories.budget_tokens``).
            now: the time recency is measured at (default: now), for reproducible rankings.
            session: an incognito session recalls nothing.
            include_history: also rank superseded entries.
            workspace: the working tree code anchors are checked against.
            explain: add each arm's candidates and the ranking parameters.

        Raises:
            InvalidInputError: an empty query, or k / budget out of range.
        """
        pair = self.space(space, user)
        settings = self.settings_
        moment = as_moment(now)
        k = settings.top_n if k is None else k
        budget = settings.budget_tokens if budget_tokens is None else budget_tokens
        if not query.strip():
            raise InvalidInputError(
                "the query is empty", hint="ask about something, e.g. 'deploys'"
            )
        if not 1 <= k <= 100 or not 1 <= budget <= 100_000:
            raise InvalidInputError(
                f"k={k} or budget_tokens={budget} is out of range",
                hint="use k between 1 and 100 and a budget between 1 and 100000 tokens",
            )
        session_id = controls.check_session(session)
        base = RecallResult(
            query=query, results=[], context="", used_tokens=0, budget_tokens=budget,
            now=_stamp(moment), user=pair.user, space=pair.space,
        )  # fmt: skip
        state = await self._ctx.store.read(lambda tx: controls.load_state(tx, pair.scope))
        if not state.memory_enabled:
            base.status, base.warnings = "disabled", ["memory is turned off for this space"]
            return base
        if state.incognito(session_id):
            base.status, base.warnings = "incognito", ["incognito session: nothing is recalled"]
            return base
        started = time.perf_counter()
        plan = recall.RecallPlan(
            query=query,
            scope=pair.scope,
            k=k,
            budget_tokens=budget,
            now=moment,
            include_history=include_history,
            workspace=self._root(pair, workspace),
        )
        await self._drain_backlog()
        ranked = await recall.rank(self._ctx, plan, settings)
        tokens = self._ctx.tokens
        fitted, context, used = recall.assemble_context(
            ranked.picked_memories(),
            budget_tokens=budget,
            count=tokens.count,
            truncate=tokens.truncate,
        )
        anchors = recall.check_anchors(fitted, plan.workspace)
        scored = {c.item_id: c for c in ranked.scored}
        base.results = recall.hits(fitted, scored, anchors)
        base.context, base.used_tokens = context, used
        base.warnings = ranked.warnings
        took_ms = round((time.perf_counter() - started) * 1000, 3)
        stamp = _stamp(moment)
        run_payload = {
            "returned": len(fitted),
            "candidates": len(ranked.scored),
            "lexical": len(ranked.arms.lexical),
            "semantic": len(ranked.arms.semantic),
            "ids": [m.memory_id for m in fitted],
        }

        fitted_ids = {m.item_id for m in fitted}
        fetched = [c for c in ranked.scored if c.item_id in fitted_ids]

        def persist(tx: Tx) -> int:
            recall.persist_scores(tx, fetched, stamp)
            return tx.log.record_run(
                pair.scope, "memory_recall", took_ms=took_ms, payload=run_payload
            )

        run_id = await self._ctx.store.write(persist)
        if explain:
            base.explain = {
                "run_id": run_id,
                "parameters": {
                    "alpha": settings.alpha, "beta": settings.beta, "gamma": settings.gamma,
                    "tau_days": settings.tau_days, "rrf_k": settings.rrf_k,
                    "relevance_gate": settings.relevance_gate,
                    "mmr_lambda": settings.mmr_lambda, "k": k,
                },
                "lexical": [[h.item_id, round(h.score, 6)] for h in ranked.arms.lexical],
                "semantic": [[h.item_id, round(h.score, 6)] for h in ranked.arms.semantic],
                "lexical_terms": list(ranked.arms.lexical_terms),
                "fused": ranked.fused,
                "picked_by_mmr": [m.memory_id for m in ranked.picked_memories()],
                "took_ms": {**ranked.took_ms, "total": took_ms},
            }  # fmt: skip
        else:
            base.explain = {"run_id": run_id}
        return base

    async def mark_used(
        self,
        memory_ids: Sequence[str],
        *,
        space: str,
        user: str | None = None,
        run_id: int | None = None,
    ) -> int:
        """Record that recalled memories influenced an answer (the hit-rate telemetry)."""
        pair = self.space(space, user)
        payload = {"ids": list(memory_ids), "run_id": run_id}
        await self._ctx.store.write(
            lambda tx: tx.log.record_event(pair.scope, "used", payload=payload)
        )
        return len(memory_ids)

    async def show(
        self,
        memory_id: str,
        *,
        space: str,
        user: str | None = None,
        workspace: str | Path | None = None,
    ) -> MemoryView:
        """One memory with every field (and its anchor re-checked).

        Raises:
            NotFoundError: no such memory in this space.
        """
        pair = self.space(space, user)
        return await self._view(pair, memory_id, workspace=self._root(pair, workspace))

    async def entries(
        self,
        *,
        space: str,
        user: str | None = None,
        pinned: bool | None = None,
        manually_saved: bool | None = None,
        tag: str | None = None,
        include_history: bool = False,
        limit: int = 50,
        offset: int = 0,
    ) -> EntryPage:
        """Entries newest first, filtered by ``pinned`` / ``manually_saved`` / ``tag``."""
        pair = self.space(space, user)
        if not 1 <= limit <= _MAX_LIST or offset < 0:
            raise InvalidInputError(
                f"limit={limit}, offset={offset} out of range",
                hint=f"use 1 <= limit <= {_MAX_LIST} and offset >= 0",
            )
        parts: list[Filter | None] = [None if include_history else CURRENT]
        if pinned is not None:
            parts.append(Compare("item.pinned", "=", int(pinned)))
        if manually_saved is not None:
            parts.append(Compare("item.meta.manually_saved", "=", int(manually_saved)))
        if tag:
            parts.append(Compare("item.tags", "=", tag.strip().lower()))
        where = all_of(*parts)

        def page(tx: Tx) -> tuple[list[Memory], int, dict[int, str]]:
            ids, total = tx.items.select(
                pair.scope, kinds=_KINDS, where=where, order_by="item.created_at",
                descending=True, limit=limit, offset=offset,
            )  # fmt: skip
            items = tx.items.get(ids)
            found = [memory_of(items[i]) for i in ids if i in items]
            return found, total, linked_uids(tx, found)

        found, total, links = await self._ctx.store.read(page)
        views = [memory_view(m, pair, superseded_by=links.get(m.superseded_by or 0)) for m in found]
        return EntryPage(
            entries=views, total=total, limit=limit, offset=offset, user=pair.user, space=pair.space
        )

    async def history(
        self, memory_id: str, *, space: str, user: str | None = None
    ) -> list[MemoryView]:
        """The supersession chain ``memory_id`` belongs to, oldest first.

        Raises:
            NotFoundError: no such memory in this space.
        """
        pair = self.space(space, user)

        def chain(tx: Tx) -> tuple[list[Memory], dict[int, str]]:
            start = _resolve(tx, pair, memory_id)
            seen: dict[int, Memory] = {start.item_id: memory_of(start)}
            frontier = [seen[start.item_id]]
            while frontier and len(seen) < 200:
                current = frontier.pop()
                older = tx.items.by_uid(list(current.supersedes))
                linked = [i for i in older.values() if i.scope == pair.scope.key]
                if current.superseded_by is not None:
                    newer = tx.items.get([current.superseded_by])
                    linked.extend(newer.values())
                for item in linked:
                    if item.item_id not in seen:
                        seen[item.item_id] = memory_of(item)
                        frontier.append(seen[item.item_id])
            ordered = sorted(seen.values(), key=lambda m: (m.valid_from or m.created_at, m.item_id))
            return ordered, linked_uids(tx, ordered)

        ordered, links = await self._ctx.store.read(chain)
        return [
            memory_view(m, pair, superseded_by=links.get(m.superseded_by or 0)) for m in ordered
        ]

    async def summary(self, *, space: str, user: str | None = None) -> MemorySummary:
        """A short human-readable account of what is remembered in the space."""
        pair = self.space(space, user)

        def collect(tx: Tx) -> tuple[int, int, int, list[Memory], list[Memory], Counter[str]]:
            total = tx.items.count(pair.scope, kinds=_KINDS, where=CURRENT)
            pinned_where = And((CURRENT, Compare("item.pinned", "=", 1)))
            pinned = tx.items.count(pair.scope, kinds=_KINDS, where=pinned_where)
            saved = tx.items.count(
                pair.scope, kinds=_KINDS,
                where=And((CURRENT, Compare("item.meta.manually_saved", "=", 1))),
            )  # fmt: skip
            top_pinned = [
                memory_of(i)
                for i in tx.items.find(pair.scope, kinds=_KINDS, where=pinned_where, limit=5)
            ]
            ids, _ = tx.items.select(
                pair.scope, kinds=_KINDS, where=CURRENT, order_by="item.created_at",
                descending=True, limit=5,
            )  # fmt: skip
            recent = [memory_of(i) for i in tx.items.get(ids).values()]
            tags: Counter[str] = Counter()
            after: Item | None = None
            while True:
                page = tx.items.find(
                    pair.scope, kinds=_KINDS, where=CURRENT, after=after, limit=500, meta_keys=()
                )
                for item in page:
                    tags.update(item.tags)
                if len(page) < 500:
                    break
                after = page[-1]
            return total, pinned, saved, top_pinned, recent, tags

        total, pinned, saved, top_pinned, recent, tags = await self._ctx.store.read(collect)
        lines = [
            f"{total} memories in {pair.space} for {pair.user} ({pinned} pinned, {saved} saved by hand)."
        ]
        if tags:
            lines.append("Topics: " + ", ".join(f"{t} ({n})" for t, n in tags.most_common(8)) + ".")
        if top_pinned:
            lines.append("Pinned: " + "; ".join(_short(m.text) for m in top_pinned) + ".")
        if recent:
            recent.sort(key=lambda m: m.created_at, reverse=True)
            lines.append("Most recent: " + "; ".join(_short(m.text) for m in recent) + ".")
        return MemorySummary(
            user=pair.user, space=pair.space, text="\n".join(lines), entries=total,
            pinned=pinned, manually_saved=saved, top_tags=tags.most_common(10),
        )  # fmt: skip

    # -- user controls --------------------------------------------------------------------

    async def pin(self, memory_id: str, *, space: str, user: str | None = None) -> MemoryView:
        """Pin a memory (never trimmed). Raises NotFoundError for an unknown id."""
        return await self._set_pin(memory_id, space, user, pinned=True)

    async def unpin(self, memory_id: str, *, space: str, user: str | None = None) -> MemoryView:
        """Unpin a memory. Raises NotFoundError for an unknown id."""
        return await self._set_pin(memory_id, space, user, pinned=False)

    async def _set_pin(
        self, memory_id: str, space: str, user: str | None, *, pinned: bool
    ) -> MemoryView:
        pair = self.space(space, user)

        def apply(tx: Tx) -> str:
            item = _resolve(tx, pair, memory_id)
            tx.items.update(item.item_id, ItemUpdate(pinned=pinned))
            tx.log.record_event(pair.scope, "pin" if pinned else "unpin", subject=item.uid)
            return item.uid

        uid = await self._ctx.store.write(apply)
        return await self._view(pair, uid)

    async def forget(
        self,
        memory_id: str,
        *,
        space: str,
        user: str | None = None,
        now: datetime | str | None = None,
    ) -> ForgetResult:
        """Hard-delete a memory (row, lexical and vector rows) and keep a 24-hour tombstone of
        its digest so the same text is not re-created at once. Entries it had superseded
        become current again.

        Raises:
            NotFoundError: no such memory in this space.
        """
        pair = self.space(space, user)
        moment = as_moment(now)
        expires = _stamp(moment + timedelta(hours=self.settings_.tombstone_hours))

        def apply(tx: Tx) -> str:
            item = _resolve(tx, pair, memory_id)
            memory = memory_of(item)
            digest = str(item.metadata.get("digest") or prepare_digest(item.text)[1])
            if self.settings_.tombstone_hours > 0:
                tx.tombstones.add(
                    pair.scope, TOMBSTONE_KIND, digest, expires_at=expires,
                    payload={"memory_id": item.uid},
                )  # fmt: skip
            restored = [
                older.item_id
                for older in tx.items.by_uid(list(memory.supersedes)).values()
                if older.scope == pair.scope.key and older.superseded_by == item.item_id
            ]
            tx.items.delete([item.item_id])
            for older_id in restored:
                tx.items.update(older_id, ItemUpdate(valid_to=None, superseded_by=None))
            tx.log.record_event(
                pair.scope, "forget", subject=item.uid,
                payload={"digest": digest, "restored": len(restored)},
            )  # fmt: skip
            return item.uid

        uid = await self._ctx.store.write(apply)
        return ForgetResult(
            id=uid, forgotten=True,
            tombstone_expires_at=expires if self.settings_.tombstone_hours > 0 else None,
            user=pair.user, space=pair.space,
        )  # fmt: skip

    async def settings(
        self, *, space: str, user: str | None = None, session: str | None = None
    ) -> SettingsView:
        pair = self.space(space, user)
        state = await self._ctx.store.read(lambda tx: controls.load_state(tx, pair.scope))
        return self._settings_view(pair, state, session)

    async def update_settings(
        self,
        *,
        space: str,
        user: str | None = None,
        memory_enabled: bool | None = None,
        incognito_default: bool | None = None,
        soft_cap: int | None = None,
    ) -> SettingsView:
        """Set the space's ``memory_enabled`` / ``incognito_default`` (and its soft cap)."""
        pair = self.space(space, user)
        if soft_cap is not None and soft_cap < 1:
            raise InvalidInputError(f"soft_cap={soft_cap}", hint="use a cap of at least 1")
        changes: dict[str, Any] = {
            k: v
            for k, v in {
                "memory_enabled": memory_enabled,
                "incognito_default": incognito_default,
                "soft_cap": soft_cap,
            }.items()
            if v is not None
        }

        def apply(tx: Tx) -> controls.SpaceState:
            state = replace(controls.load_state(tx, pair.scope), **changes)
            controls.save_state(tx, pair.scope, state)
            tx.log.record_event(pair.scope, "settings", payload=changes)
            return state

        state = await self._ctx.store.write(apply)
        return self._settings_view(pair, state, None)

    async def incognito_start(
        self, *, space: str, user: str | None = None, session: str | None = None
    ) -> SettingsView:
        """Start incognito for ``session`` (default: the space's default session)."""
        return await self._incognito(space, user, session, on=True)

    async def incognito_end(
        self, *, space: str, user: str | None = None, session: str | None = None
    ) -> SettingsView:
        return await self._incognito(space, user, session, on=False)

    async def _incognito(
        self, space: str, user: str | None, session: str | None, *, on: bool
    ) -> SettingsView:
        pair = self.space(space, user)
        session_id = controls.check_session(session)

        def apply(tx: Tx) -> controls.SpaceState:
            state = controls.with_session(controls.load_state(tx, pair.scope), session_id, on)
            controls.save_state(tx, pair.scope, state)
            tx.log.record_event(pair.scope, "incognito", payload={"session": session_id, "on": on})
            return state

        state = await self._ctx.store.write(apply)
        return self._settings_view(pair, state, session_id)

    def _settings_view(
        self, pair: MemorySpace, state: controls.SpaceState, session: str | None
    ) -> SettingsView:
        session_id = controls.check_session(session)
        return SettingsView(
            user=pair.user, space=pair.space, memory_enabled=state.memory_enabled,
            incognito_default=state.incognito_default,
            soft_cap=state.soft_cap or self.settings_.soft_cap,
            incognito=state.incognito(session_id), session=session_id,
            sessions=dict(state.sessions),
        )  # fmt: skip

    # -- maintenance and telemetry ------------------------------------------------------------

    async def stats(
        self, *, space: str, user: str | None = None, now: datetime | str | None = None
    ) -> MemoryStats:
        pair = self.space(space, user)
        moment = as_moment(now)
        return await self._ctx.store.read(
            lambda tx: space_stats(tx, pair, self.settings_, now=moment)
        )

    async def backfill(
        self,
        *,
        space: str | None = None,
        user: str | None = None,
        batch_size: int | None = None,
        max_batches: int | None = None,
    ) -> BackfillReport:
        """Run ``memory_embed_backfill`` over one space (or every space) until its queue is empty."""
        scope = self.space(space, user).scope if space is not None else None
        return await run_backfill(
            self._ctx, self.settings_, scope=scope, batch_size=batch_size, max_batches=max_batches
        )

    async def apply_retention(
        self, *, space: str, user: str | None = None, now: datetime | str | None = None
    ) -> list[str]:
        """Hard-delete unpinned entries older than ``memories.retention_days``; their ids."""
        from memory_core.memories.capacity import apply_retention

        pair = self.space(space, user)
        moment = as_moment(now)

        def apply(tx: Tx) -> list[str]:
            gone = apply_retention(
                tx, pair.scope, now=moment, retention_days=self.settings_.retention_days
            )
            if gone:
                tx.log.record_event(pair.scope, "retention", payload={"deleted": gone})
            return gone

        return await self._ctx.store.write(apply)

    async def rollup(
        self,
        *,
        space: str,
        user: str | None = None,
        older_than_days: float = 30.0,
        min_group: int = 3,
        now: datetime | str | None = None,
    ) -> RollupReport:
        """Summarise old entries into roll-ups per topic (the originals are superseded, not
        deleted; each roll-up lists them in ``source_ids``)."""
        pair = self.space(space, user)
        return await run_rollup(
            self._ctx, pair, self.settings_, older_than_days=older_than_days,
            min_group=min_group, now=as_moment(now),
        )  # fmt: skip

    # -- transfer -------------------------------------------------------------------------

    async def export(
        self,
        out: IO[str] | str | Path,
        *,
        space: str | None = None,
        user: str | None = None,
        with_vectors: bool = True,
    ) -> ExportReport:
        """Write memories (one space, or all) as JSONL that :meth:`import_` reads back losslessly."""
        pair = self.space(space, user) if space is not None else None
        return await transfer.export_memories(self._ctx, out, space=pair, with_vectors=with_vectors)

    async def import_(
        self,
        source: IO[str] | Iterable[str] | str | Path,
        *,
        format: str = "jsonl",
        space: str | None = None,
        user: str | None = None,
    ) -> ImportReport:
        """Import memories: ``jsonl`` (a memoir export, or lines with ``text`` and the ``add``
        fields), ``official`` (the reference memory server's ``memory.jsonl``) or
        ``claude-code`` (an auto-memory folder with ``MEMORY.md``).

        Raises:
            InvalidInputError: an unknown format, or a space missing where the input has none.
            NotFoundError: the file or folder does not exist.
        """
        from memory_core.memories import importers

        pair = self.space(space, user) if space is not None else None
        return await importers.run_import(self, self._ctx, source, format=format, space=pair)

    @property
    def graph(self) -> OfficialGraph:
        """The official memory server's graph operations (compatibility mode)."""
        from memory_core.memories.graph_compat import OfficialGraph

        return OfficialGraph(self._ctx, self)

    # -- helpers ----------------------------------------------------------------------------

    def _root(self, pair: MemorySpace, workspace: str | Path | None) -> Path | None:
        if workspace is not None:
            return Path(workspace).expanduser().resolve()
        if pair.space.startswith("project:/"):
            folder = Path(pair.space.removeprefix("project:"))
            return folder if folder.is_dir() else None
        return None

    async def _view(
        self, pair: MemorySpace, memory_id: str, *, workspace: Path | None = None
    ) -> MemoryView:
        def load(tx: Tx) -> tuple[Memory, dict[int, str]]:
            memory = memory_of(_resolve(tx, pair, memory_id))
            return memory, linked_uids(tx, [memory])

        memory, links = await self._ctx.store.read(load)
        check = check_anchor(memory.anchor, workspace) if memory.anchor else None
        return memory_view(
            memory, pair, superseded_by=links.get(memory.superseded_by or 0), anchor=check
        )


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _resolve(tx: Tx, pair: MemorySpace, memory_id: str) -> Item:
    """The memory ``memory_id`` (or a unique prefix of 6+ characters) in ``pair``.

    Raises:
        NotFoundError: no such memory in this space (another space's ids are not found).
        InvalidInputError: an ambiguous prefix.
    """
    wanted = memory_id.strip().lower()
    item = tx.items.by_uid([wanted]).get(wanted) if wanted else None
    if item is not None and item.scope == pair.scope.key and item.kind == MEMORY:
        return item
    if 6 <= len(wanted) < 24 and all(c in "0123456789abcdef" for c in wanted):
        found = tx.items.find(
            pair.scope, kinds=_KINDS, where=Compare("item.uid", "LIKE", wanted + "%"), limit=2
        )
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise InvalidInputError(
                f"memory id prefix {memory_id!r} is ambiguous",
                hint="give more characters of the id",
            )
    raise NotFoundError(
        f"no memory {memory_id!r} in space {pair.space!r} (user {pair.user!r})",
        hint="list the space's memories with `memoir memory list` or recall them first",
    )
