"""Streamed ingest: a large input read, chunked, embedded, filed and stored batch by batch.

Memory stays bounded by one batch (``hierarchy.ingest_batch_bytes``) and the category
centroids, whatever the input's size. Each batch is written in one transaction together with
the progress recorded on the input's resource (uid from the scope and the input's sha256), so
a kill loses at most the batch in flight and a re-run resumes after the last stored batch.

Filing: the first batch of an empty scope builds the tree (the offline classifier's first
re-clustering); later batches join the leaf whose running centroid is nearest, without
re-reading the store; when the stream ends the managed tree is re-clustered once if the scope
is within ``hierarchy.recluster_max_chunks``. An agent's ``category`` or a configured model
files as in a one-shot ingest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import structlog

from memory_core.chunking import chunk_by_sentences
from memory_core.errors import CategoryMissingError
from memory_core.hierarchy.batches import Batch, IngestProgress, ProgressCallback, read_batches
from memory_core.hierarchy.classify import Classification, Classifier
from memory_core.hierarchy.clustering import normalise_rows
from memory_core.hierarchy.filing import (
    FILING_ATTEMPTS,
    file_offline,
    file_proposed,
    offline_tree_for,
)
from memory_core.hierarchy.port_store import PortHierarchyStore
from memory_core.hierarchy.results import IngestedChunk, IngestResult, StreamInfo
from memory_core.hierarchy.store import NewChunk
from memory_core.models import content_hash, stable_id
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.hierarchy.service import HierarchyService
    from memory_core.llm.agents import HierarchyAgents

__all__ = ["LISTED_CHUNKS", "ingest_stream"]

log = structlog.get_logger(__name__)
LISTED_CHUNKS = 200  # a streamed result lists its first chunks only (the rest are counted)


@dataclass
class LeafCentroids:
    """Running sums of unit chunk vectors per leaf: new chunks join the nearest leaf."""

    sums: dict[int, np.ndarray] = field(default_factory=dict)

    def nearest(self, unit: np.ndarray) -> list[int]:
        ids = sorted(self.sums)
        matrix = normalise_rows(np.stack([self.sums[i] for i in ids]))
        return [ids[int(j)] for j in np.argmax(unit @ matrix.T, axis=1)]

    def add(self, leaf_ids: Sequence[int], unit: np.ndarray) -> None:
        for leaf, row in zip(leaf_ids, unit, strict=True):
            total = self.sums.get(leaf)
            self.sums[leaf] = row.copy() if total is None else total + row


async def ingest_stream(
    service: HierarchyService,
    store: PortHierarchyStore,
    stream: BinaryIO,
    *,
    digest: str,
    size: int,
    scope: Scope,
    source: str | None,
    agents: HierarchyAgents,
    category: str | Sequence[str] | None,
    progress: ProgressCallback | None,
    result: IngestResult,
) -> IngestResult:
    """Ingest ``stream`` (``size`` bytes, sha256 ``digest``) batch by batch into ``result``."""
    settings = service.settings
    resource_id, state = await store.ingest_resource(
        scope,
        uid=stable_id("hierarchy-input", scope, digest),
        uri=source or f"text:{digest[:16]}",
        content_hash=digest,
        size=size,
    )
    info = StreamInfo(bytes=size, resource_id=resource_id)
    info.batches_skipped = int(state.get("batches_done", 0))
    info.chunks = int(state.get("chunks_done", 0))
    done_bytes = int(state.get("bytes_done", 0))
    result.stream = info
    if state.get("complete"):
        info.batches = info.batches_skipped
        await _report(progress, info, done_bytes)
        return result
    tree = offline_tree_for(store, settings)
    offline_filing = category is None and agents.models["classify"].offline_only
    classifier = Classifier(
        store, agents, depth=settings.depth, max_categories=settings.max_categories
    )
    centroids: LeafCentroids | None = None
    base = datetime.now(UTC)
    batches = read_batches(
        stream,
        batch_bytes=settings.ingest_batch_bytes,
        origin=source or "the text",
        start=done_bytes,
        char_start=int(state.get("chars_done", 0)),
        first_index=info.batches_skipped,
    )
    for batch in batches:
        texts, counts, spans = _chunks(service, batch)
        uids = [stable_id("hierarchy", scope, content_hash(t)) for t in texts]
        existing = await store.existing_chunks(scope, uids)
        todo = [i for i, uid in enumerate(uids) if uid not in existing and uid not in uids[:i]]
        vectors = None
        if todo:
            await service.ctx.embedder.ensure_loaded()
            vectors = np.asarray(
                await service.ctx.embedder.embed_documents([texts[i] for i in todo]),
                dtype=np.float32,
            )
        for attempt in range(FILING_ATTEMPTS):
            leaves: list[int] = []
            if todo and vectors is not None:
                fresh = [texts[i] for i in todo]
                placed: list[Classification] | None = None
                if category is not None:
                    placed = await file_proposed(
                        store, settings, scope, category, fresh, vectors, result.warnings
                    )
                elif offline_filing and tree is not None and centroids is None:
                    if await store.count_categories(scope) == 0:
                        placed = await file_offline(
                            store,
                            agents,
                            settings,
                            scope,
                            fresh,
                            vectors,
                            [counts[i] for i in todo],
                        )
                    else:
                        centroids = await _stored_centroids(store, scope, settings.depth)
                if placed is not None:
                    leaves = [p.leaf.category_id for p in placed]
                    for where in placed:
                        result.categories_created.extend(where.created)
                elif centroids is not None and centroids.sums:
                    leaves = centroids.nearest(normalise_rows(vectors))
                else:
                    for i in todo:
                        where = await classifier.classify(scope, texts[i])
                        leaves.append(where.leaf.category_id)
                        result.categories_created.extend(where.created)
                if centroids is not None:
                    centroids.add(leaves, normalise_rows(vectors))
            filed = [
                (
                    leaf,
                    NewChunk(
                        uid=uids[i],
                        text=texts[i],
                        token_count=counts[i],
                        content_hash=content_hash(texts[i]),
                        # Offsets in microseconds keep the input's order among a category's chunks.
                        created_at=(base + timedelta(microseconds=spans[i][0])).isoformat(
                            timespec="microseconds"
                        ),
                        source=source,
                        metadata={"start_offset": spans[i][0], "end_offset": spans[i][1]},
                    ),
                )
                for leaf, i in zip(leaves, todo, strict=True)
            ]
            marker = {
                "bytes_done": batch.byte_end,
                "chars_done": batch.char_start + len(batch.text),
                "batches_done": batch.index + 1,
                "chunks_done": info.chunks + len(texts),
                "batch_bytes": settings.ingest_batch_bytes,
                "complete": batch.byte_end >= size,
                "source": source,
            }
            try:
                ids = await store.add_batch(
                    scope, filed, vectors, resource_id=resource_id, progress=marker
                )
                break
            except CategoryMissingError:
                # Another process re-clustered the tree since these chunks were filed:
                # file them again against the tree as it is now.
                if attempt + 1 == FILING_ATTEMPTS:
                    raise
                log.info("leaf category vanished; filing the batch again", batch=batch.index)
                centroids = None
        info.chunks += len(texts)
        info.new_chunks += len(filed)
        if centroids is None and offline_filing and tree is not None and filed:
            centroids = await _stored_centroids(store, scope, settings.depth)
        _list(result, filed, ids, existing, uids, texts, counts, spans)
        info.batches = batch.index + 1
        await _report(progress, info, batch.byte_end)
    if (
        tree is not None
        and offline_filing
        and (await tree.state(scope)).managed
        and info.new_chunks
        and sum((await store.chunk_counts(scope)).values()) <= settings.recluster_max_chunks
    ):
        await tree.recluster(scope)  # the tree settles on everything the stream brought
    await _name_listed(service, store, scope, result)
    return result


def _chunks(
    service: HierarchyService, batch: Batch
) -> tuple[list[str], list[int], list[tuple[int, int]]]:
    settings = service.settings
    chunking = chunk_by_sentences(
        batch.text,
        count=service.ctx.tokens.count,
        min_chars=settings.min_chunk_chars,
        max_chars=settings.max_chunk_chars,
        delimiters=settings.chunk_delimiters,
    )
    texts = [c.text for c in chunking.chunks]
    counts = [c.tokens for c in chunking.chunks]
    spans = [(batch.char_start + c.start, batch.char_start + c.end) for c in chunking.chunks]
    return texts, counts, spans


async def _name_listed(
    service: HierarchyService, store: PortHierarchyStore, scope: Scope, result: IngestResult
) -> None:
    """Fill the listed chunks' category paths (as they are after any re-clustering)."""
    if not result.chunks:
        return
    where = await store.existing_chunks(scope, [c.chunk_id for c in result.chunks])
    paths = await service._paths_by_id(store, scope)
    for chunk in result.chunks:
        item_id, leaf = where.get(chunk.chunk_id, (chunk.item_id, chunk.category_id))
        chunk.item_id, chunk.category_id = item_id, leaf
        chunk.category_path = paths.get(leaf, "")


async def _stored_centroids(store: PortHierarchyStore, scope: Scope, depth: int) -> LeafCentroids:
    return LeafCentroids(await store.leaf_vector_sums(scope, depth=depth))


def _list(
    result: IngestResult,
    filed: Sequence[tuple[int, NewChunk]],
    ids: Sequence[int],
    existing: dict[str, tuple[int, int]],
    uids: Sequence[str],
    texts: Sequence[str],
    counts: Sequence[int],
    spans: Sequence[tuple[int, int]],
) -> None:
    room = LISTED_CHUNKS - len(result.chunks)
    if room <= 0:
        return
    stored = {chunk.uid: (item_id, leaf) for (leaf, chunk), item_id in zip(filed, ids, strict=True)}
    for i, uid in enumerate(uids[:room]):
        item_id, leaf = stored.get(uid) or existing.get(uid) or (0, 0)
        result.chunks.append(
            IngestedChunk(
                chunk_id=uid,
                item_id=item_id,
                category_path="",
                category_id=leaf,
                token_count=counts[i],
                chars=len(texts[i]),
                start_offset=spans[i][0],
                end_offset=spans[i][1],
                already_stored=uid in existing,
            )
        )


async def _report(progress: ProgressCallback | None, info: StreamInfo, done: int) -> None:
    if progress is None:
        return
    await progress(
        IngestProgress(
            bytes_done=done,
            bytes_total=info.bytes,
            batches_done=info.batches,
            chunks_done=info.chunks,
            new_chunks=info.new_chunks,
            batches_skipped=info.batches_skipped,
        )
    )
