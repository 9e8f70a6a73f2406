"""The hierarchy's storage, on the store's ports (no SQL): categories in the category
repository, chunks as items of kind ``hierarchy_chunk`` filed under leaf categories (so the
one hybrid engine finds them too), query runs in the log.

:class:`PortHierarchyStore` implements the feature's narrow
:class:`~memory_core.hierarchy.store.HierarchyStore` protocol; the hierarchy's own rule that
chunks are filed only under categories at the configured depth is enforced here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory_core.errors import CategoryMissingError, InvalidInputError
from memory_core.filters import Compare
from memory_core.hierarchy.store import HierarchyChunk, NewChunk
from memory_core.kinds import HIERARCHY_CHUNK
from memory_core.models import Category, Item, NewItem, NewResource
from memory_core.scope import Scope
from memory_core.storage.ports import ResourceUpdate, Store, Tx

__all__ = ["CHUNK_KIND", "PortHierarchyStore", "RemovedKnowledge"]

CHUNK_KIND = HIERARCHY_CHUNK


def _chunk(item: Item) -> HierarchyChunk:
    return HierarchyChunk(
        chunk_id=item.item_id,
        uid=item.uid,
        category_id=int(item.category_id or 0),
        text=item.text,
        token_count=item.token_count,
        content_hash=item.content_hash,
        created_at=item.created_at,
    )


class PortHierarchyStore:
    """The hierarchy on an open :class:`~memory_core.storage.ports.Store` (the facade owns it).

    Args:
        store: the open store.
        depth: the configured hierarchy depth (1..100); chunks link only at this level.

    Raises:
        InvalidInputError: ``depth`` is outside 1..100.
    """

    def __init__(self, store: Store, *, depth: int) -> None:
        if not 1 <= depth <= 100:
            raise InvalidInputError(
                f"hierarchy depth {depth} is outside 1..100", hint="set hierarchy.depth to 1..100"
            )
        self.store = store
        self.depth = depth

    @property
    def backend(self) -> str:
        return self.store.backend

    async def open(self) -> PortHierarchyStore:
        return self  # the facade opened the store (and its schema)

    async def close(self) -> None:
        return None  # the facade closes the store

    async def categories(
        self, scope: Scope, *, parent_id: int | None, level: int | None = None
    ) -> list[Category]:
        return await self.store.read(
            lambda tx: tx.categories.children(scope, parent_id, level=level)
        )

    async def all_categories(self, scope: Scope) -> list[Category]:
        return await self.store.read(lambda tx: tx.categories.all(scope))

    async def count_categories(self, scope: Scope) -> int:
        return await self.store.read(lambda tx: tx.categories.count(scope))

    async def create_category(
        self, scope: Scope, *, parent_id: int | None, level: int, name: str
    ) -> Category:
        if not 1 <= level <= self.depth:
            raise InvalidInputError(
                f"category level {level} is outside the hierarchy depth 1..{self.depth}",
                hint="create categories from level 1 down to hierarchy.depth",
            )
        return await self.store.write(
            lambda tx: tx.categories.create(scope, parent_id=parent_id, level=level, name=name)
        )

    async def add_chunks(
        self,
        scope: Scope,
        category_id: int,
        chunks: Sequence[NewChunk],
        vectors: Any | None = None,
    ) -> list[int]:
        items = [
            NewItem(
                uid=chunk.uid,
                kind=CHUNK_KIND,
                text=chunk.text,
                token_count=chunk.token_count,
                scope=scope,
                content_hash=chunk.content_hash,
                category_id=category_id,
                created_at=chunk.created_at,
                metadata={**chunk.metadata, **({"source": chunk.source} if chunk.source else {})},
            )
            for chunk in chunks
        ]
        matrix = None if vectors is None else np.asarray(vectors, dtype=np.float32)
        if matrix is not None and (matrix.ndim != 2 or matrix.shape[0] != len(items)):
            raise InvalidInputError(
                f"got vectors of shape {matrix.shape} for {len(items)} chunks",
                hint="pass one vector per chunk (an array of shape (n, dim))",
            )
        depth = self.depth

        def write(tx: Tx) -> list[int]:
            category = tx.categories.get([category_id]).get(category_id)
            if category is None:
                raise CategoryMissingError(
                    f"category {category_id} is missing (deleted since the chunks were filed: "
                    "another process re-clustered or removed it)",
                    hint="file the chunks again against the current tree",
                )
            if category.scope != scope.key or category.level != depth:
                raise InvalidInputError(
                    f"chunks link only to leaf categories (level {depth}); "
                    f"category {category_id} is at level {category.level}",
                    hint="classify the chunk down to the deepest level first",
                )
            return tx.items.add(items, matrix)

        return await self.store.write(write)

    async def chunks_in_category(
        self,
        scope: Scope,
        category_id: int,
        *,
        after: tuple[str, str] | None = None,
        limit: int = 100,
    ) -> list[HierarchyChunk]:
        where = Compare("item.category_id", "=", category_id)
        cursor = None
        if after is not None:
            # Keyset pagination in the spec's (created_at, uid) order: the page starts after
            # the last chunk already read.
            cursor = Item(
                item_id=0, uid=after[1], scope=scope.key, kind=CHUNK_KIND, text="", token_count=0,
                content_hash="", resource_id=None, category_id=category_id, start_offset=None,
                end_offset=None, start_line=None, end_line=None, simhash=None, importance=0.0,
                pinned=False, repeat_count=0, tags=(), created_at=after[0], updated_at="",
                valid_from=None, valid_to=None, superseded_by=None, deleted=False, metadata={},
            )  # fmt: skip
        page = await self.store.read(
            lambda tx: tx.items.find(
                scope,
                kinds=[CHUNK_KIND],
                where=where,
                order="created",
                after=cursor,
                limit=max(1, int(limit)),
            )
        )
        return [_chunk(item) for item in page]

    async def existing_chunks(
        self, scope: Scope, uids: Sequence[str]
    ) -> dict[str, tuple[int, int]]:
        """Chunks already stored, by uid: (chunk id, category id). Lets re-ingest skip the LLM."""
        found = await self.store.read(lambda tx: tx.items.by_uid(list(uids)))
        return {
            uid: (item.item_id, int(item.category_id))
            for uid, item in found.items()
            if item.scope == scope.key and item.kind == CHUNK_KIND and item.category_id is not None
        }

    async def chunk_counts(self, scope: Scope) -> dict[int, int]:
        """Chunks per category id (for the category tree)."""
        return await self.store.read(
            lambda tx: tx.categories.item_counts(scope, kinds=[CHUNK_KIND])
        )

    async def record_run(
        self, scope: Scope, kind: str, took_ms: float, payload: dict[str, Any]
    ) -> int:
        return await self.store.write(
            lambda tx: tx.log.record_run(scope, kind, took_ms=took_ms, payload=payload)
        )

    async def list_runs(
        self, scope: Scope, *, kind: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        kinds = [kind] if kind is not None else []
        runs = await self.store.read(lambda tx: tx.log.runs(scope, kinds=kinds, limit=limit))
        return [
            {
                "run_id": r.run_id,
                "scope": r.scope,
                "kind": r.kind,
                "started_at": r.started_at,
                "took_ms": r.took_ms,
                "payload": r.payload,
            }
            for r in runs
        ]

    # -- streamed ingest (one transaction per batch) and removal -------------------------------

    async def ingest_resource(
        self, scope: Scope, *, uid: str, uri: str, content_hash: str, size: int
    ) -> tuple[int, dict[str, Any]]:
        """The resource recording a streamed ingest of one input (created on first use), and
        the progress its metadata holds (empty for a new one)."""

        def write(tx: Tx) -> tuple[int, dict[str, Any]]:
            found = tx.resources.by_uid([uid]).get(uid)
            if found is not None and found.scope == scope.key and not found.deleted:
                return found.resource_id, dict(found.metadata)
            resource = NewResource(
                uid=uid, scope=scope, kind="text", uri=uri, content_hash=content_hash, size=size
            )
            return tx.resources.add(resource), {}

        return await self.store.write(write)

    async def add_batch(
        self,
        scope: Scope,
        filed: Sequence[tuple[int, NewChunk]],
        vectors: Any | None,
        *,
        resource_id: int,
        progress: dict[str, Any],
    ) -> list[int]:
        """Store one batch in one transaction: its chunks under their leaves (with their
        lexical and vector rows) and the resource's progress, so a crash loses at most it.

        Raises:
            InvalidInputError: a category is not a leaf, or the vectors do not fit.
        """
        items = [
            NewItem(
                uid=chunk.uid,
                kind=CHUNK_KIND,
                text=chunk.text,
                token_count=chunk.token_count,
                scope=scope,
                content_hash=chunk.content_hash,
                resource_id=resource_id,
                category_id=category_id,
                created_at=chunk.created_at,
                metadata={**chunk.metadata, **({"source": chunk.source} if chunk.source else {})},
            )
            for category_id, chunk in filed
        ]
        matrix = None if vectors is None else np.asarray(vectors, dtype=np.float32)
        if matrix is not None and (matrix.ndim != 2 or matrix.shape[0] != len(items)):
            raise InvalidInputError(
                f"got vectors of shape {matrix.shape} for {len(items)} chunks",
                hint="pass one vector per chunk (an array of shape (n, dim))",
            )
        depth = self.depth
        leaves = sorted({category_id for category_id, _ in filed})

        def write(tx: Tx) -> list[int]:
            found = tx.categories.get(leaves)
            for category_id in leaves:
                category = found.get(category_id)
                if category is None:
                    raise CategoryMissingError(
                        f"category {category_id} is missing (deleted since the chunks were "
                        "filed: another process re-clustered or removed it)",
                        hint="file the chunks again against the current tree",
                    )
                if category.scope != scope.key or category.level != depth:
                    raise InvalidInputError(
                        f"chunks link only to leaf categories (level {depth}); "
                        f"category {category_id} is not one",
                        hint="classify the chunk down to the deepest level first",
                    )
            ids = tx.items.add(items, matrix) if items else []
            tx.resources.update(resource_id, ResourceUpdate(metadata=progress))
            return ids

        return await self.store.write(write)

    async def leaf_vector_sums(self, scope: Scope, *, depth: int) -> dict[int, np.ndarray]:
        """The sum of the unit vectors of each leaf's chunks, read page by page (memory stays
        bounded by a page and the leaves, not by the scope's size)."""

        def read(tx: Tx) -> dict[int, np.ndarray]:
            leaves = {c.category_id for c in tx.categories.all(scope) if c.level == depth}
            sums: dict[int, np.ndarray] = {}
            after: Item | None = None
            while True:
                page = tx.items.find(
                    scope, kinds=[CHUNK_KIND], order="id", after=after, limit=_PAGE, meta_keys=[]
                )
                vectors = tx.vectors.vectors([item.item_id for item in page])
                for item in page:
                    vector = vectors.get(item.item_id)
                    if vector is None or item.category_id not in leaves:
                        continue
                    unit = np.asarray(vector, dtype=np.float32)
                    unit = unit / max(float(np.linalg.norm(unit)), 1e-12)
                    leaf = int(item.category_id)
                    sums[leaf] = sums[leaf] + unit if leaf in sums else unit
                if len(page) < _PAGE:
                    return sums
                after = page[-1]

        return await self.store.read(read)

    async def remove_chunks(
        self,
        scope: Scope,
        *,
        chunk_ids: Sequence[str] = (),
        source: str | None = None,
        category_ids: Sequence[int] = (),
    ) -> RemovedKnowledge:
        """Delete chunks (with their lexical and vector rows) chosen by uid or item id, by the
        source they were ingested from, or by category (its whole subtree), then the
        categories left empty, in one transaction."""

        def write(tx: Tx) -> RemovedKnowledge:
            doomed: dict[int, int | None] = {}  # item id -> its category
            wanted = [c for c in chunk_ids if c]
            by_uid = tx.items.by_uid(wanted)
            numeric = [int(c) for c in wanted if c.isdigit() and c not in by_uid]
            for item in [*by_uid.values(), *tx.items.get(numeric).values()]:
                if item.scope == scope.key and item.kind == CHUNK_KIND:
                    doomed[item.item_id] = item.category_id
            resources: list[int] = []
            if source is not None:
                for resource in tx.resources.find(scope, kinds=["text"], uri=source):
                    if "batches_done" not in resource.metadata:  # not a streamed ingest's record
                        continue
                    resources.append(resource.resource_id)
                    doomed.update(
                        _page_ids(tx, scope, Compare("item.resource_id", "=", resource.resource_id))
                    )
                doomed.update(_page_ids(tx, scope, Compare("item.meta.source", "=", source)))
            if category_ids:
                every = tx.categories.all(scope)
                subtree = _subtree(every, set(category_ids))
                for category_id in sorted(subtree):
                    doomed.update(
                        _page_ids(tx, scope, Compare("item.category_id", "=", category_id))
                    )
            removed = tx.items.delete(sorted(doomed)) if doomed else 0
            if resources:
                tx.resources.delete(resources)
            touched = {c for c in doomed.values() if c is not None} | set(category_ids)
            emptied = _drop_empty_categories(tx, scope, touched)
            return RemovedKnowledge(chunks=removed, categories=emptied, resources=len(resources))

        return await self.store.write(write)


@dataclass(frozen=True, slots=True)
class RemovedKnowledge:
    """What a removal deleted: chunks, the categories left empty, the ingest records."""

    chunks: int
    categories: int
    resources: int


_PAGE = 1000


def _page_ids(tx: Tx, key: Scope, where: Compare) -> dict[int, int | None]:
    ids: dict[int, int | None] = {}
    after: Item | None = None
    while True:
        page = tx.items.find(
            key, kinds=[CHUNK_KIND], where=where, order="id", after=after, limit=_PAGE,
            meta_keys=[],
        )  # fmt: skip
        ids.update((item.item_id, item.category_id) for item in page)
        if len(page) < _PAGE:
            return ids
        after = page[-1]


def _subtree(categories: Sequence[Category], roots: set[int]) -> set[int]:
    chosen = {c.category_id for c in categories if c.category_id in roots}
    grew = True
    while grew:
        children = {c.category_id for c in categories if c.parent_id in chosen} - chosen
        chosen |= children
        grew = bool(children)
    return chosen


def _drop_empty_categories(tx: Tx, key: Scope, touched: set[int]) -> int:
    """Delete the touched categories and their ancestors once they hold no item and no child,
    deepest first (a parent emptied by its children goes too); other empty categories stay."""
    holding = tx.categories.item_counts(key)
    categories = sorted(tx.categories.all(key), key=lambda c: (-c.level, c.category_id))
    by_id = {c.category_id: c for c in categories}
    candidates = set(touched)
    for category_id in touched:
        parent = by_id[category_id].parent_id if category_id in by_id else None
        while parent is not None and parent in by_id:
            candidates.add(parent)
            parent = by_id[parent].parent_id
    candidates |= _subtree(categories, touched)
    alive = set(by_id)
    removed = 0
    for category in categories:
        if category.category_id not in candidates or holding.get(category.category_id):
            continue
        if any(c.parent_id == category.category_id and c.category_id in alive for c in categories):
            continue
        tx.categories.delete([category.category_id])
        alive.discard(category.category_id)
        removed += 1
    return removed
