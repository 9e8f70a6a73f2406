"""``memory_embed_backfill``: embeds queued memories in batches (spec "Background Workers").

A memory is written with ``needs_embedding = 1`` (and a ``queued_at`` time); the worker takes
the queue in item-id order, ``batch_size`` at a time, embeds the batch (outside any
transaction), retries a failing embedder with exponential backoff and jitter, and writes the
vectors with ``needs_embedding = 0`` in one transaction per batch. A batch that still fails
after its retries is left queued (its entries record the attempt and the error) and the worker
moves on, so one bad batch never blocks the queue; recall keeps answering from the sparse arm.

When an entry has fewer than two tags, its embedding neighbours (cosine >= 0.75) propose their
most common tags (spec "Metadata Enrichment": "use embedding neighbours to propose tags").

Metrics, per run and per space (``run`` rows of kind ``memory_backfill``): entries embedded,
failures, attempts, time-to-embed (queued to embedded) of each entry, the embedder's time.
"""

from __future__ import annotations

import functools
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from memory_core.errors import EmbeddingError
from memory_core.kinds import MEMORY
from memory_core.memories.ranking import parse_time
from memory_core.memories.records import NEEDS_EMBEDDING
from memory_core.memories.responses import BackfillReport
from memory_core.models import Item, ItemUpdate
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.config import MemorySettings
    from memory_core.context import CoreContext
    from memory_core.storage.ports import Tx

__all__ = ["p95", "run_backfill"]

_KINDS = (MEMORY,)
_NEIGHBOUR_MIN_COSINE = 0.75
Sleep = Callable[[float], Awaitable[None]]


def p95(values: Sequence[float]) -> float | None:
    """The 95th percentile (nearest rank), or None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, int(np.ceil(0.95 * len(ordered))) - 1)]


async def _embed_with_retry(
    ctx: CoreContext,
    texts: list[str],
    *,
    retries: int,
    backoff_s: float,
    sleep: Sleep,
    rng: random.Random,
) -> tuple[np.ndarray | None, int, str | None]:
    """(vectors or None, attempts, last error)."""
    error: str | None = None
    for attempt in range(retries + 1):
        try:
            await ctx.embedder.ensure_loaded()
            return await ctx.embedder.embed_documents(texts), attempt + 1, None
        except EmbeddingError as exc:
            error = exc.message
            if attempt < retries:
                # Exponential backoff with full jitter: waits of up to 1x, 2x, 4x... backoff_s.
                await sleep(backoff_s * (2**attempt) * (0.5 + rng.random() / 2))
    return None, retries + 1, error


def _neighbour_tags(tx: Tx, item: Item, vector: np.ndarray) -> tuple[str, ...]:
    found = tx.vectors.search(vector, Scope.of(item.scope), kinds=_KINDS, k=5)
    neighbours = [h.item_id for h in found.hits if h.item_id != item.item_id]
    close = {h.item_id for h in found.hits if h.score >= _NEIGHBOUR_MIN_COSINE}
    counts: Counter[str] = Counter()
    for other in tx.items.get([n for n in neighbours if n in close], meta_keys=()).values():
        counts.update(t for t in other.tags if t not in item.tags)
    return tuple(tag for tag, _ in counts.most_common(2))


def _write_batch(
    tx: Tx, *, items: Sequence[Item], vectors: np.ndarray, stamp: str, now: datetime
) -> tuple[dict[str, list[float]], int]:
    """Store the vectors; returns time-to-embed (ms) per scope and neighbour-tagged count."""
    latencies: dict[str, list[float]] = {}
    tagged = 0
    current = tx.items.get([i.item_id for i in items])
    for item, vector in zip(items, vectors, strict=True):
        live = current.get(item.item_id)
        if live is None or not live.metadata.get("needs_embedding"):
            continue  # forgotten or embedded by another worker meanwhile
        metadata = dict(live.metadata)
        queued = str(metadata.get("queued_at") or live.created_at)
        latency = max(0.0, (now - parse_time(queued)).total_seconds() * 1000)
        metadata.update({"needs_embedding": 0, "embedded_at": stamp})
        metadata.pop("embed_error", None)
        changes: dict[str, Any] = {"vector": vector, "metadata": metadata}
        if len(live.tags) < 2:
            proposed = _neighbour_tags(tx, live, vector)
            if proposed:
                changes["tags"] = (*live.tags, *proposed)
                metadata["neighbour_tags"] = list(proposed)
                tagged += 1
        tx.items.update(live.item_id, ItemUpdate(**changes))
        latencies.setdefault(live.scope, []).append(round(latency, 3))
    return latencies, tagged


def _get(tx: Tx, *, ids: list[int]) -> dict[int, Item]:
    return tx.items.get(ids)


def _queued(tx: Tx, *, scope: Scope | None, after: Item | None, limit: int) -> list[Item]:
    return tx.items.find(
        scope, kinds=_KINDS, where=NEEDS_EMBEDDING, order="id", after=after, limit=limit
    )


def _record_run(tx: Tx, *, scope: Scope, took_ms: float, payload: dict[str, Any]) -> int:
    return tx.log.record_run(scope, "memory_backfill", took_ms=took_ms, payload=payload)


def _mark_failed(tx: Tx, *, items: Sequence[Item], error: str, attempts: int) -> None:
    current = tx.items.get([i.item_id for i in items])
    scopes: set[str] = set()
    for item in current.values():
        metadata = dict(item.metadata)
        metadata["embed_attempts"] = int(metadata.get("embed_attempts", 0)) + 1
        metadata["embed_error"] = error[:300]
        tx.items.update(item.item_id, ItemUpdate(metadata=metadata))
        scopes.add(item.scope)
    for key in sorted(scopes):
        tx.log.record_event(
            Scope.of(key),
            "embed_failure",
            payload={"entries": len(items), "attempts": attempts, "error": error[:300]},
        )


async def run_backfill(
    ctx: CoreContext,
    settings: MemorySettings,
    *,
    scope: Scope | None = None,
    item_ids: Sequence[int] | None = None,
    batch_size: int | None = None,
    max_batches: int | None = None,
    sleep: Sleep = anyio.sleep,
    rng: random.Random | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> BackfillReport:
    """Embed queued memories (all of ``scope``, or just ``item_ids``) until the queue is empty
    or ``max_batches`` ran."""
    size = batch_size or settings.backfill_batch
    rng = rng or random.Random()
    report = BackfillReport()
    started = time.perf_counter()
    after: Item | None = None
    wanted = list(item_ids) if item_ids is not None else None
    all_latencies: list[float] = []
    while max_batches is None or report.batches < max_batches:
        if wanted is not None:
            chunk, wanted = wanted[:size], wanted[size:]
            if not chunk:
                break
            found = await ctx.store.read(functools.partial(_get, ids=chunk))
            batch = [
                found[i] for i in chunk if i in found and found[i].metadata.get("needs_embedding")
            ]
            if not batch:
                continue
        else:
            batch = await ctx.store.read(
                functools.partial(_queued, scope=scope, after=after, limit=size)
            )
            if not batch:
                break
            after = batch[-1]
        report.batches += 1
        embed_started = time.perf_counter()
        vectors, attempts, error = await _embed_with_retry(
            ctx,
            [i.text for i in batch],
            retries=settings.backfill_retries,
            backoff_s=settings.backfill_backoff_s,
            sleep=sleep,
            rng=rng,
        )
        report.embed_ms += (time.perf_counter() - embed_started) * 1000
        report.attempts += attempts
        if vectors is None:
            report.failed += len(batch)
            report.warnings.append(f"{len(batch)} entries stay queued: {error}")
            await ctx.store.write(
                functools.partial(_mark_failed, items=batch, error=error or "?", attempts=attempts)
            )
            continue
        now = clock()
        stamp = now.isoformat(timespec="microseconds")
        latencies, tagged = await ctx.store.write(
            functools.partial(_write_batch, items=batch, vectors=vectors, stamp=stamp, now=now)
        )
        report.neighbour_tags += tagged
        batch_ms = round((time.perf_counter() - embed_started) * 1000, 3)
        for key, values in latencies.items():
            report.embedded += len(values)
            all_latencies.extend(values)
            payload = {
                "embedded": len(values),
                "time_to_embed_ms": values,
                "attempts": attempts,
                "failures": attempts - 1,
            }
            await ctx.store.write(
                functools.partial(
                    _record_run, scope=Scope.of(key), took_ms=batch_ms, payload=payload
                )
            )
    report.remaining = await ctx.store.read(
        lambda tx: tx.items.count(scope, kinds=_KINDS, where=NEEDS_EMBEDDING)
    )
    report.took_ms = round((time.perf_counter() - started) * 1000, 3)
    report.embed_ms = round(report.embed_ms, 3)
    report.p95_time_to_embed_ms = p95(all_latencies)
    if report.took_ms > 0:
        report.per_second = round(report.embedded / (report.took_ms / 1000), 2)
    return report
