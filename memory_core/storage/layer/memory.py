"""The in-memory layer store (seed 004 §11.1): the default, brute-force vectors, BM25 lexical.

Nothing outlives the process; hand the same instance to a second service to "reopen" it.
"""

from __future__ import annotations

import copy
import math
import re
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memory_core.errors import SchemaError
from memory_core.storage.layer.port import (
    CategoryRow,
    DdlMode,
    IntentionRow,
    ItemRow,
    ResourceRow,
    RevisionRow,
    RunRow,
    ScopeFilter,
    ScopeValues,
    matches,
)

__all__ = ["InMemoryLayerStore", "bm25_scores", "lexical_tokens"]

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
        self._items: dict[str, ItemRow] = {}
        self._postings: dict[str, set[str]] = defaultdict(set)
        self._counts: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._categories: dict[tuple[tuple[str, ...], str], CategoryRow] = {}
        self._intentions: list[IntentionRow] = []
        self._revisions: list[RevisionRow] = []
        self._runs: list[RunRow] = []

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
            for row in self._resources.values():
                if (
                    row.scope == scope
                    and row.content_hash == content_hash
                    and row.pipeline_revision == revision
                ):
                    return copy.deepcopy(row)
            return None

    def add_resource(self, row: ResourceRow) -> None:
        with self._lock:
            self._resources[row.resource_id] = copy.deepcopy(row)

    def upsert_items(self, rows: Sequence[ItemRow]) -> None:
        with self._lock:
            for row in rows:
                self._unindex(row.item_id)
                stored = copy.deepcopy(row)
                self._items[row.item_id] = stored
                if stored.status == "active":
                    tokens = lexical_tokens(stored.text)
                    counts: dict[str, int] = defaultdict(int)
                    for token in tokens:
                        counts[token] += 1
                        self._postings[token].add(row.item_id)
                    self._counts[row.item_id] = dict(counts)
                    self._lengths[row.item_id] = len(tokens)

    def _unindex(self, item_id: str) -> None:
        for token in self._counts.pop(item_id, {}):
            self._postings[token].discard(item_id)
        self._lengths.pop(item_id, None)

    def items(
        self, selector: ScopeFilter, *, status: str | None = "active", limit: int | None = None
    ) -> list[ItemRow]:
        with self._lock:
            out = [
                copy.deepcopy(row)
                for row in self._items.values()
                if (status is None or row.status == status) and matches(row.scope, selector)
            ]
        out.sort(key=lambda r: (r.created_at, r.item_id))
        return out if limit is None else out[:limit]

    def items_by_id(self, item_ids: Sequence[str]) -> list[ItemRow]:
        with self._lock:
            return [copy.deepcopy(self._items[i]) for i in item_ids if i in self._items]

    def count_items(self, selector: ScopeFilter) -> int:
        with self._lock:
            return sum(
                1
                for row in self._items.values()
                if row.status == "active" and matches(row.scope, selector)
            )

    def vector_search(
        self, selector: ScopeFilter, vector: np.ndarray, k: int
    ) -> list[tuple[str, float]]:
        with self._lock:
            rows = [
                row
                for row in self._items.values()
                if row.status == "active"
                and row.embedding is not None
                and matches(row.scope, selector)
            ]
            if not rows or k <= 0:
                return []
            matrix = np.vstack([r.embedding for r in rows if r.embedding is not None])
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(rows[i].item_id, float(scores[i])) for i in top]

    def lexical_search(
        self, selector: ScopeFilter, terms: Sequence[str], k: int
    ) -> list[tuple[str, float]]:
        with self._lock:
            candidates = {
                item_id
                for term in terms
                for item_id in self._postings.get(term, ())
                if matches(self._items[item_id].scope, selector)
            }
            in_scope = {
                i
                for i, row in self._items.items()
                if row.status == "active" and matches(row.scope, selector)
            }
            scores = bm25_scores(terms, self._postings, self._lengths, self._counts, in_scope)
        ranked = sorted(
            ((i, s) for i, s in scores.items() if i in candidates), key=lambda p: (-p[1], p[0])
        )
        return ranked[:k]

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
            self._intentions.append(copy.deepcopy(row))

    def latest_intentions(self, selector: ScopeFilter) -> list[IntentionRow]:
        latest: dict[tuple[str, ...], IntentionRow] = {}
        with self._lock:
            for row in self._intentions:
                if not matches(row.scope, selector):
                    continue
                key = self._key(row.scope)
                if key not in latest or row.version > latest[key].version:
                    latest[key] = row
            return [copy.deepcopy(latest[k]) for k in sorted(latest)]

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

    def close(self) -> None:
        return None
