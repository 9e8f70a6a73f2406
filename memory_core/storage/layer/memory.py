"""The in-memory layer store (seed 004 §11.1): the default, brute-force vectors, BM25 lexical.

Nothing outlives the process; hand the same instance to a second service to "reopen" it.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
import math
import re
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from memory_core.errors import SchemaError
from memory_core.storage.layer.centroids import CategorySums, Membership, fold_item_changes
from memory_core.storage.layer.leases import MemoryLeases
from memory_core.storage.layer.port import (
    CategoryRow,
    DdlMode,
    IntentionRow,
    ItemRow,
    MemberRow,
    ResourceRow,
    RevisionRow,
    RunRow,
    ScopeFilter,
    ScopeValues,
    matches,
)
from memory_core.storage.layer.vectors import VectorBlock

__all__ = ["InMemoryLayerStore", "bm25_scores", "lexical_tokens"]

T = TypeVar("T")
_WORD = re.compile(r"\w+")
_K1 = 1.2
_B = 0.75


def lexical_tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bm25_scores(
    terms: Sequence[str],
    postings: Mapping[str, set[str]],
    lengths: Mapping[str, int],
    counts: Mapping[str, Mapping[str, int]],
    candidates: set[str],
) -> dict[str, float]:
    """BM25 of ``terms`` over ``candidates`` (document ids), higher is better."""
    if not candidates:
        return {}
    avg = sum(lengths[d] for d in candidates) / len(candidates)
    scores: dict[str, float] = defaultdict(float)
    total = len(candidates)
    for term in dict.fromkeys(terms):
        docs = postings.get(term, set()) & candidates
        if not docs:
            continue
        idf = math.log(1 + (total - len(docs) + 0.5) / (len(docs) + 0.5))
        for doc in docs:
            tf = counts[doc].get(term, 0)
            norm = tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * lengths[doc] / max(avg, 1e-9)))
            scores[doc] += idf * norm
    return dict(scores)


class InMemoryLayerStore:
    """Every table a list or dict guarded by one lock; vectors compared by brute force."""

    backend = "memory"

    def __init__(self, *, vectors: bool = True) -> None:
        self.vector_capable = vectors
        self._lock = threading.RLock()
        self._fields: tuple[str, ...] | None = None
        self._meta: dict[str, Any] | None = None
        self._resources: dict[str, ResourceRow] = {}
        # (scope, content hash, revision) -> resource id: find_resource without a scan
        self._resource_keys: dict[tuple[Any, str, int], str] = {}
        self._items: dict[str, ItemRow] = {}
        # item ids per scope key, so a selector visits its scopes, not every item
        self._by_scope: dict[tuple[str, ...], dict[str, None]] = defaultdict(dict)
        # active item ids per (scope key, category key): a category refresh reads its members
        self._by_category: dict[tuple[tuple[str, ...], str], dict[str, None]] = defaultdict(dict)
        # one growing matrix per selector searched, kept current by upsert_items
        self._vectors: dict[Any, tuple[ScopeFilter, VectorBlock]] = {}
        self._postings: dict[str, set[str]] = defaultdict(set)
        self._counts: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._categories: dict[tuple[tuple[str, ...], str], CategoryRow] = {}
        self._sums: dict[tuple[tuple[str, ...], str], CategorySums] = {}
        self._intentions: list[IntentionRow] = []
        self._latest: dict[tuple[str, ...], IntentionRow] = {}
        self._revisions: list[RevisionRow] = []
        self._runs: list[RunRow] = []
        self._leases = MemoryLeases()

    def provision(self, fields: Sequence[str], mode: DdlMode) -> None:
        with self._lock:
            if self._fields is None:
                if mode == "validate":
                    raise SchemaError(
                        "ddl_mode='validate' but this in-memory store has no layer tables yet",
                        hint="create the service once with ddl_mode='create'",
                    )
                self._fields = tuple(fields)

    def get_meta(self) -> dict[str, Any] | None:
        with self._lock:
            return copy.deepcopy(self._meta)

    def set_meta(self, meta: Mapping[str, Any]) -> None:
        with self._lock:
            self._meta = copy.deepcopy(dict(meta))

    def _key(self, scope: ScopeValues) -> tuple[str, ...]:
        assert self._fields is not None
        return tuple(scope[f] for f in self._fields)

    def find_resource(
        self, scope: ScopeValues, content_hash: str, revision: int
    ) -> ResourceRow | None:
        with self._lock:
            found = self._resource_keys.get(_resource_key(scope, content_hash, revision))
            return None if found is None else copy.deepcopy(self._resources[found])

    def add_resource(self, row: ResourceRow) -> None:
        with self._lock:
            previous = self._resources.get(row.resource_id)
            if previous is not None:
                old = _resource_key(
                    previous.scope, previous.content_hash, previous.pipeline_revision
                )
                if self._resource_keys.get(old) == row.resource_id:
                    del self._resource_keys[old]
            self._resources[row.resource_id] = copy.deepcopy(row)
            key = _resource_key(row.scope, row.content_hash, row.pipeline_revision)
            self._resource_keys.setdefault(key, row.resource_id)

    def _in_scope(self, selector: ScopeFilter, status: str | None = "active") -> list[ItemRow]:
        assert self._fields is not None
        out: list[ItemRow] = []
        for key, ids in self._by_scope.items():
            if matches(dict(zip(self._fields, key, strict=True)), selector):
                rows = (self._items[i] for i in ids)
                out.extend(r for r in rows if status is None or r.status == status)
        return out

    def upsert_items(self, rows: Sequence[ItemRow]) -> None:
        with self._lock:
            for selector, block in self._vectors.values():
                for row in rows:
                    live = row.status == "active" and row.embedding is not None
                    if live and matches(row.scope, selector):
                        block.put(row.item_id, np.asarray(row.embedding, dtype=np.float32))
                    else:
                        block.drop(row.item_id)
            changes: list[tuple[tuple[str, ...], Membership | None, ItemRow]] = []
            for row in rows:
                before = self._items.get(row.item_id)
                old = (
                    None
                    if before is None
                    else (before.category_key, before.status == "active", before.embedding)
                )
                changes.append((self._key(row.scope), old, row))
            self._sums.update(fold_item_changes(self._sums, changes))
            for row in rows:
                self._unindex(row.item_id)
                stored = _copy_item(row)
                self._items[row.item_id] = stored
                key = self._key(stored.scope)
                self._by_scope[key][row.item_id] = None
                if stored.status == "active" and stored.category_key is not None:
                    self._by_category[(key, stored.category_key)][row.item_id] = None
                if stored.status == "active":
                    tokens = lexical_tokens(stored.text)
                    counts: dict[str, int] = defaultdict(int)
                    for token in tokens:
                        counts[token] += 1
                        self._postings[token].add(row.item_id)
                    self._counts[row.item_id] = dict(counts)
                    self._lengths[row.item_id] = len(tokens)

    def _unindex(self, item_id: str) -> None:
        old = self._items.get(item_id)
        if old is not None and old.category_key is not None:
            members = self._by_category.get((self._key(old.scope), old.category_key))
            if members is not None:
                members.pop(item_id, None)
        for token in self._counts.pop(item_id, {}):
            self._postings[token].discard(item_id)
        self._lengths.pop(item_id, None)

    def items(
        self,
        selector: ScopeFilter,
        *,
        status: str | None = "active",
        limit: int | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[ItemRow]:
        wanted = None if categories is None else set(categories)
        with self._lock:
            out = [
                _copy_item(row)
                for row in self._in_scope(selector, status)
                if wanted is None or row.category_key in wanted
            ]
        out.sort(key=lambda r: (r.created_at, r.item_id))
        return out if limit is None else out[:limit]

    def items_by_id(self, item_ids: Sequence[str]) -> list[ItemRow]:
        with self._lock:
            return [_copy_item(self._items[i]) for i in item_ids if i in self._items]

    def count_items(self, selector: ScopeFilter) -> int:
        with self._lock:
            return len(self._in_scope(selector))

    def category_members(self, scope: ScopeValues, keys: Sequence[str]) -> list[MemberRow]:
        with self._lock:
            key = self._key(scope)
            rows = [
                self._items[i]
                for category in dict.fromkeys(keys)
                for i in self._by_category.get((key, category), {})
            ]
            rows.sort(key=lambda r: (r.created_at, r.item_id))
            # vectors are never changed in place (see _copy_item), so they are shared
            return [
                MemberRow(r.item_id, str(r.category_key), r.text, r.confidence, r.embedding)
                for r in rows
            ]

    def category_sums(self, scope: ScopeValues, keys: Sequence[str]) -> dict[str, CategorySums]:
        with self._lock:
            key = self._key(scope)
            return {k: self._sums[(key, k)] for k in keys if (key, k) in self._sums}

    def put_category_sums(self, scope: ScopeValues, sums: Mapping[str, CategorySums]) -> None:
        with self._lock:
            key = self._key(scope)
            for category, row in sums.items():
                self._sums[(key, category)] = row

    def vector_search(
        self, selector: ScopeFilter, vector: np.ndarray, k: int
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        key = tuple(sorted(selector.items()))
        with self._lock:
            cached = self._vectors.get(key)
            if cached is None:
                block = VectorBlock(len(vector))
                for row in self._in_scope(selector):
                    if row.embedding is not None:
                        block.put(row.item_id, np.asarray(row.embedding, dtype=np.float32))
                if len(self._vectors) >= 32:
                    self._vectors.pop(next(iter(self._vectors)))
                cached = (dict(selector), block)
                self._vectors[key] = cached
            return cached[1].top(vector, k)

    def vector_search_many(
        self, selector: ScopeFilter, vectors: Sequence[np.ndarray], k: int
    ) -> list[list[tuple[str, float]]]:
        with self._lock:
            return [self.vector_search(selector, v, k) for v in vectors]

    def lexical_search(
        self, selector: ScopeFilter, terms: Sequence[str], k: int
    ) -> list[tuple[str, float]]:
        with self._lock:
            in_scope = {r.item_id for r in self._in_scope(selector)}
            candidates = {
                item_id
                for term in terms
                for item_id in self._postings.get(term, ())
                if item_id in in_scope
            }
            scores = bm25_scores(terms, self._postings, self._lengths, self._counts, in_scope)
        return heapq.nsmallest(
            k, ((i, s) for i, s in scores.items() if i in candidates), key=lambda p: (-p[1], p[0])
        )

    def upsert_categories(self, rows: Sequence[CategoryRow]) -> None:
        with self._lock:
            for row in rows:
                self._categories[(self._key(row.scope), row.category_key)] = copy.deepcopy(row)

    def categories(self, selector: ScopeFilter) -> list[CategoryRow]:
        with self._lock:
            out = [
                copy.deepcopy(r) for r in self._categories.values() if matches(r.scope, selector)
            ]
        out.sort(key=lambda r: (self._key(r.scope), r.category_key))
        return out

    def add_intention(self, row: IntentionRow) -> None:
        with self._lock:
            stored = copy.deepcopy(row)
            self._intentions.append(stored)
            key = self._key(row.scope)
            if key not in self._latest or row.version > self._latest[key].version:
                self._latest[key] = stored

    def latest_intentions(self, selector: ScopeFilter) -> list[IntentionRow]:
        with self._lock:
            return [
                copy.deepcopy(self._latest[k])
                for k in sorted(self._latest)
                if matches(self._latest[k].scope, selector)
            ]

    def add_revision(self, row: RevisionRow) -> None:
        with self._lock:
            self._revisions.append(copy.deepcopy(row))

    def revisions(self) -> list[RevisionRow]:
        with self._lock:
            return copy.deepcopy(self._revisions)

    def add_run(self, row: RunRow) -> None:
        with self._lock:
            self._runs.append(copy.deepcopy(row))

    def runs(self, limit: int = 50) -> list[RunRow]:
        with self._lock:
            return copy.deepcopy(self._runs[-limit:][::-1])

    def finished_run(self, kind: str, runner_run_id: str) -> RunRow | None:
        with self._lock:
            for row in reversed(self._runs):
                body = row.body
                if (row.kind, body.get("runner_run_id"), body.get("status")) == (
                    kind,
                    runner_run_id,
                    "ok",
                ):
                    return copy.deepcopy(row)
        return None

    def atomically(self, work: Callable[[], T]) -> T:
        # one lock: no other thread sees the store half way (nothing to roll back to)
        with self._lock:
            return work()

    def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        return self._leases.claim(name, holder, ttl_s)

    def release_lease(self, name: str, holder: str) -> None:
        self._leases.release(name, holder)

    def close(self) -> None:
        return None


def _resource_key(scope: ScopeValues, content_hash: str, revision: int) -> tuple[Any, str, int]:
    return tuple(sorted(scope.items())), content_hash, revision


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (what evidence holds), several times cheaper than
    :func:`copy.deepcopy`; anything else is handed to deepcopy."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return copy.deepcopy(value)


def _copy_item(row: ItemRow) -> ItemRow:
    # Rows are handed out mutable: copy what callers may change in place; vectors are never
    # changed in place, so they are shared.
    return dataclasses.replace(row, scope=dict(row.scope), evidence=_copy_json(row.evidence))
