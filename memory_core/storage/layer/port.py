"""The memory layer's store port (seed 004 §3, §11): resources, items, categories, intentions,
pipeline revisions and run logs, every row carrying the user's scope columns.

The port is synchronous: a step is one unit of work in the runner's thread (the sync runner, a
Burr action or a Temporal activity). A :data:`ScopeFilter` names every scope field with either a
tuple of allowed values or ``None`` (ANY); the pipeline's selector policy builds it, the backend
only compiles it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import numpy as np

if TYPE_CHECKING:
    from memory_core.storage.layer.centroids import CategorySums

__all__ = [
    "RESERVED_COLUMNS",
    "CategoryRow",
    "DdlMode",
    "IntentionRow",
    "ItemRow",
    "LayerStore",
    "MemberRow",
    "ResourceRow",
    "RevisionRow",
    "RunRow",
    "ScopeFilter",
    "ScopeValues",
    "matches",
]

T = TypeVar("T")
DdlMode = Literal["create", "validate"]
ScopeValues = dict[str, str]
ScopeFilter = Mapping[str, tuple[str, ...] | None]

# Columns of the layer's tables: a scope field may not take one of these names.
RESERVED_COLUMNS = frozenset(
    {
        "rowid", "resource_id", "item_id", "category_key", "kind", "uri", "content", "content_hash",
        "mime", "metadata", "artifacts", "pipeline_revision", "created_at", "updated_at", "text",
        "evidence", "confidence", "stability", "version", "embedding", "status", "name",
        "description", "summary", "anchor_ids", "item_count", "goals", "constraints", "progress",
        "source_item_ids", "run_id", "body", "key", "value", "revision", "change", "pipelines",
        "tsv", "lex_len", "seq", "vector_sum", "vector_count", "member_count", "weight_max",
        "scored_centroid", "runner_up", "reserve_ids",
    }
)  # fmt: skip


def matches(scope: Mapping[str, str], selector: ScopeFilter) -> bool:
    """Whether a row's scope falls inside ``selector`` (ANY = ``None`` accepts every value)."""
    return all(allowed is None or scope.get(name) in allowed for name, allowed in selector.items())


@dataclass
class ResourceRow:
    resource_id: str
    scope: ScopeValues
    kind: str
    content_hash: str
    pipeline_revision: int
    uri: str | None = None
    content: str | None = None
    mime: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass
class ItemRow:
    item_id: str
    scope: ScopeValues
    resource_id: str
    text: str
    evidence: list[dict[str, Any]]
    confidence: float
    stability: str
    version: int = 1
    category_key: str | None = None
    status: str = "active"
    embedding: np.ndarray | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True)
class MemberRow:
    """What a category refresh reads of an item: no evidence, nothing to copy."""

    item_id: str
    category_key: str
    text: str
    confidence: float
    embedding: np.ndarray | None


@dataclass
class CategoryRow:
    scope: ScopeValues
    category_key: str
    name: str
    description: str = ""
    summary: str = ""
    anchor_ids: list[str] = field(default_factory=list)
    item_count: int = 0
    updated_at: float = 0.0


@dataclass
class IntentionRow:
    scope: ScopeValues
    version: int
    goals: list[str]
    constraints: list[str]
    progress: list[str]
    source_item_ids: list[str] = field(default_factory=list)
    created_at: float = 0.0


@dataclass
class RevisionRow:
    revision: int
    change: str
    pipelines: dict[str, Any]
    created_at: float = 0.0


@dataclass
class RunRow:
    run_id: str
    kind: str
    body: dict[str, Any]
    created_at: float = 0.0


class LayerStore(Protocol):
    """What the memory layer asks of a backend. Every read takes a :data:`ScopeFilter`."""

    backend: str
    vector_capable: bool

    def provision(self, fields: Sequence[str], mode: DdlMode) -> None:
        """Create (or, in validate mode, check) the tables with ``fields`` as scope columns.

        Raises:
            SchemaError: validate mode and the tables or scope columns are not there.
        """
        ...

    def get_meta(self) -> dict[str, Any] | None: ...

    def set_meta(self, meta: Mapping[str, Any]) -> None: ...

    def find_resource(
        self, scope: ScopeValues, content_hash: str, revision: int
    ) -> ResourceRow | None: ...

    def add_resource(self, row: ResourceRow) -> None: ...

    def upsert_items(self, rows: Sequence[ItemRow]) -> None:
        """Insert or replace items, and fold them into their categories' running centroid
        sums in the same transaction (an item leaving a category subtracts its old embedding).

        A write that changes an active member's confidence or embedding must be followed, in
        the same transaction, by a refresh of its category (memorize and evolve do): the
        incremental anchor choice trusts that members outside the reserve did not change."""
        ...

    def items(
        self,
        selector: ScopeFilter,
        *,
        status: str | None = "active",
        limit: int | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[ItemRow]:
        """Items in ``selector``, oldest first; ``categories`` keeps those category keys only."""
        ...

    def items_by_id(self, item_ids: Sequence[str]) -> list[ItemRow]: ...

    def count_items(self, selector: ScopeFilter) -> int: ...

    def category_members(self, scope: ScopeValues, keys: Sequence[str]) -> list[MemberRow]:
        """The active items of one scope in categories ``keys``, oldest first (as :meth:`items`
        orders them), without their evidence: what a category refresh needs, read per call."""
        ...

    def category_sums(self, scope: ScopeValues, keys: Sequence[str]) -> dict[str, CategorySums]:
        """The running centroid sums of categories ``keys`` of one scope (a key without a row
        has had no member). :meth:`upsert_items` keeps them in its own transaction."""
        ...

    def put_category_sums(self, scope: ScopeValues, sums: Mapping[str, CategorySums]) -> None:
        """Replace the sums rows of one scope's categories (after a refresh or a recompute)."""
        ...

    def vector_search(
        self, selector: ScopeFilter, vector: np.ndarray, k: int
    ) -> list[tuple[str, float]]: ...

    def vector_search_many(
        self, selector: ScopeFilter, vectors: Sequence[np.ndarray], k: int
    ) -> list[list[tuple[str, float]]]:
        """:meth:`vector_search` for each of ``vectors`` over one state of the store (one
        read on a server backend instead of one per vector)."""
        ...

    def lexical_search(
        self, selector: ScopeFilter, terms: Sequence[str], k: int
    ) -> list[tuple[str, float]]: ...

    def upsert_categories(self, rows: Sequence[CategoryRow]) -> None: ...

    def categories(self, selector: ScopeFilter) -> list[CategoryRow]: ...

    def add_intention(self, row: IntentionRow) -> None: ...

    def latest_intentions(self, selector: ScopeFilter) -> list[IntentionRow]: ...

    def add_revision(self, row: RevisionRow) -> None: ...

    def revisions(self) -> list[RevisionRow]: ...

    def add_run(self, row: RunRow) -> None: ...

    def runs(self, limit: int = 50) -> list[RunRow]: ...

    def finished_run(self, kind: str, runner_run_id: str) -> RunRow | None:
        """The newest run log of `kind` whose status is ok and whose engine run id (the body's
        ``runner_run_id``: a Burr app id, a Temporal workflow id) is `runner_run_id`. A scan of
        the run log: for resume, which is rare."""
        ...

    def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Claims lease ``name`` for ``holder`` until ``ttl_s`` seconds from now (or renews it
        when ``holder`` holds it already); False when another holder's lease has not expired.
        Every process on this store sees the same leases (:mod:`~.leases`)."""
        ...

    def release_lease(self, name: str, holder: str) -> None:
        """Drops lease ``name`` if ``holder`` still holds it."""
        ...

    def atomically(self, work: Callable[[], T]) -> T:
        """``work()``, whose calls on this store form one transaction (a server backend may
        run ``work`` again after a deadlock, so it must have no effect outside the store)."""
        ...

    def close(self) -> None: ...
