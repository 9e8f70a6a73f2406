"""The storage ports: everything features and the retrieval engine may ask of a backend.

A :class:`Store` hands out one transaction at a time as a :class:`Tx`, whose repositories are
narrow, synchronous protocols over that transaction::

    ids = await store.write(lambda tx: tx.items.add(items, vectors))
    hits = await store.read(lambda tx: tx.lexical.search(query, scope, kinds=("chunk",)))

Why synchronous callbacks: a write is one round trip to the backend's worker thread (SQLite's
writer connection, a PostgreSQL pooled connection), so a feature's whole unit of work (an item,
its lexical row, its vector row, its graph edges) commits or rolls back together, no lock is
held across an ``await``, and the tuned statements run without an event-loop hop each. The
callback must not block on anything but the transaction (embed first, then write).

Repositories return domain values (``memory_core.models``), never rows; they take a
:class:`~memory_core.scope.Scope`, never a bare string; filters are
:mod:`memory_core.filters` trees that each backend compiles. Domain decisions (which edges a
rule document implies, which memory a near-duplicate merges into) are made by the features as
pure functions; repositories only carry them out.

Backends: ``memory_core.storage.sqlite`` (the default, every port), ``.postgres`` (every port,
pgvector), ``.mysql`` (the ports the category hierarchy needs; see :attr:`Store.capabilities`).
Each port has one contract suite in ``tests/storage/`` run against every backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import numpy as np

from memory_core.filters import Filter
from memory_core.kinds import ItemKind, ResourceKind
from memory_core.models import (
    Category,
    DoctorFinding,
    Edge,
    Entity,
    EventRecord,
    Item,
    ItemUpdate,
    NewEntity,
    NewItem,
    NewResource,
    Resource,
    RunRecord,
    ScoredId,
    StoreStats,
    Tombstone,
)
from memory_core.scope import Scope, ScopeSchema

if TYPE_CHECKING:
    from memory_core.storage.url import DatabaseURL

__all__ = [
    "ALL_CAPABILITIES",
    "BackendName",
    "Capability",
    "CategoryRepository",
    "GraphRepository",
    "ItemOrder",
    "ItemRepository",
    "ItemTotals",
    "LexicalIndex",
    "LexicalQuery",
    "LogRepository",
    "MetaRepository",
    "ResourceRepository",
    "ResourceTotals",
    "ResourceUpdate",
    "Store",
    "TombstoneRepository",
    "Tx",
    "VectorHits",
    "VectorIndex",
]

T = TypeVar("T")

BackendName = Literal["sqlite", "postgresql", "mysql"]
Capability = Literal[
    "items", "lexical", "vectors", "resources", "graph", "categories", "log", "tombstones"
]
ALL_CAPABILITIES: frozenset[Capability] = frozenset(
    ("items", "lexical", "vectors", "resources", "graph", "categories", "log", "tombstones")
)

# Named item orders with keyset pagination (``after`` = the last item of the previous page):
# ``id``: item_id ascending; ``created``: (created_at, uid) ascending, the memoirAI chunk order;
# ``offset``: (resource_id, start_offset, item_id) ascending, a document's chunks in order;
# ``recent``: (updated_at, item_id) descending, newest change first.
ItemOrder = Literal["id", "created", "offset", "recent"]


@dataclass(frozen=True, slots=True)
class LexicalQuery:
    """Words to match (the backend quotes, tokenises and stems them; never raw syntax).

    ``AND``: rows holding every term; ``OR``: rows holding any. Scores are BM25, higher is
    better, so arms and backends compare.
    """

    terms: tuple[str, ...]
    operator: Literal["AND", "OR"] = "AND"


@dataclass(frozen=True, slots=True)
class VectorHits:
    """Nearest items, best first (``score`` = cosine similarity), and how they were found."""

    hits: list[ScoredId]
    strategy: str  # e.g. knn, knn+filter, exact+filter, cache, hnsw


@dataclass(frozen=True, slots=True)
class ItemTotals:
    items: int
    tokens: int


@dataclass(frozen=True, slots=True)
class ResourceTotals:
    live: int
    deleted: int
    bytes: int  # summed ``size`` of live resources
    newest_mtime: str | None


@dataclass(frozen=True, slots=True)
class ResourceUpdate:
    """Changes to one resource; ``None`` fields keep their value (``clear_*`` to unset)."""

    content_hash: str | None = None
    uri: str | None = None
    mtime: str | None = None
    size: int | None = None
    tags: tuple[str, ...] | None = None
    source: str | None = None
    deleted: bool | None = None
    metadata: dict[str, Any] | None = None
    clear_source: bool = False


# -- repositories (synchronous, inside one transaction) --------------------------------------


class ItemRepository(Protocol):
    """Items, written and deleted together with their lexical and vector rows."""

    def add(self, items: Sequence[NewItem], vectors: np.ndarray | None = None) -> list[int]:
        """Insert items with their lexical rows and (if given, one row each) vector rows.

        Idempotent on ``uid``: an item already stored is left as it is and its id returned.

        Raises:
            InvalidInputError: ``vectors`` does not have one row per item.
            EmbeddingError: a vector has the wrong dimension, or the store has no vector index.
        """
        ...

    def get(
        self, item_ids: Sequence[int], *, meta_keys: Sequence[str] | None = None
    ) -> dict[int, Item]:
        """Items by id (missing ids are absent from the result).

        ``meta_keys``: only these top-level metadata keys are read (bulk loads that need a
        few fields of large metadata); None reads it all.
        """
        ...

    def by_uid(self, uids: Sequence[str]) -> dict[str, Item]: ...

    def update(self, item_id: int, update: ItemUpdate) -> bool:
        """Apply ``update`` (and its lexical / vector consequences); False if no such item."""
        ...

    def delete(self, item_ids: Sequence[int]) -> int:
        """Delete items with their lexical rows, vector rows and graph edges; returns how many.

        Items that were ``superseded_by`` a deleted item lose that link.
        """
        ...

    def find(
        self,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        order: ItemOrder = "id",
        after: Item | None = None,
        limit: int = 100,
        meta_keys: Sequence[str] | None = None,
    ) -> list[Item]:
        """Live items of ``scope`` (None: every scope, for exports and admin) matching kinds
        and filter, in ``order``, one page (``meta_keys`` as in :meth:`get`)."""
        ...

    def select(
        self,
        scope: Scope,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        order_by: str | None = None,
        descending: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[int], int]:
        """A page of item ids ordered by a catalog field (``memory_core.filters.FIELDS``;
        None: item id), and how many items match in all (a structured query, no ranking)."""
        ...

    def totals(self, scope: Scope | None, *, kinds: Sequence[ItemKind] = ()) -> ItemTotals:
        """How many live items, and their stored token counts summed."""
        ...

    def count(
        self, scope: Scope | None, *, kinds: Sequence[ItemKind] = (), where: Filter | None = None
    ) -> int:
        """Live items (``scope=None``: in every scope)."""
        ...

    def near_simhash(
        self,
        scope: Scope,
        simhash: int,
        *,
        kinds: Sequence[ItemKind] = (),
        max_distance: int = 3,
        limit: int = 20,
    ) -> list[Item]:
        """Live items whose 64-bit SimHash is within ``max_distance`` bits (Hamming), nearest
        first, found through an index (never a scan of the scope)."""
        ...


class LexicalIndex(Protocol):
    """Full-text search over item text and tags (FTS5 / app-side BM25 / FULLTEXT)."""

    def search(
        self,
        query: LexicalQuery,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        limit: int = 50,
    ) -> list[ScoredId]:
        """BM25 top ``limit`` among live items passing scope, kinds and filter, best first
        (ties by item id). A filter never starves the result: the backend keeps ranking
        until ``limit`` items pass or the matches run out."""
        ...

    def term_rows(self, terms: Sequence[str]) -> dict[str, int]:
        """How many lexical rows hold each term (the cost model for choosing OR terms)."""
        ...

    def term_frequencies(
        self, terms: Sequence[str], scope: Scope, *, kinds: Sequence[ItemKind] = ()
    ) -> dict[str, dict[int, int]]:
        """One scope's postings: per distinct non-blank term, each live row of ``scope`` (of
        ``kinds``) holding it -> how often it occurs (a term of several words is a phrase;
        backends without positions count the rows holding every word, at their rarest
        word's frequency). With :meth:`lengths`, the input of per-scope BM25
        (:func:`memory_core.retrieval.bm25.bm25_search`)."""
        ...

    def lengths(self, scope: Scope, *, kinds: Sequence[ItemKind] = ()) -> dict[int, int]:
        """Each live row of ``scope`` (of ``kinds``) -> its length in tokens, as BM25 counts
        it (text + tags)."""
        ...


class VectorIndex(Protocol):
    """Item embeddings of one dimension, keyed by item id (recorded with the embedder id)."""

    @property
    def dimension(self) -> int | None:
        """The index's dimension, or None before ``Store.ensure_embedder`` created it."""
        ...

    def search(
        self,
        vector: np.ndarray,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        k: int = 50,
    ) -> VectorHits:
        """The ``k`` nearest live items by cosine similarity passing scope, kinds and filter
        (a filter never starves the result), best first, ties by item id."""
        ...

    def vectors(self, item_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors by item id (items without a vector are absent)."""
        ...

    def load(
        self, scope: Scope | None, kinds: Sequence[ItemKind] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(item_ids, matrix)`` of every vector in scope/kinds, ordered by item id."""
        ...

    def count(self, scope: Scope | None = None) -> int: ...

    def stamp(self, scope: Scope | None = None) -> str:
        """A value that changes whenever a vector of ``scope`` (None: any) may have changed,
        in the transaction that changes it (for caches, in any process)."""
        ...


class ResourceRepository(Protocol):
    """Sources: documents, rule files, conversations, files."""

    def add(self, resource: NewResource) -> int:
        """Insert a resource (idempotent on ``uid``: returns the existing id)."""
        ...

    def get(self, resource_ids: Sequence[int]) -> dict[int, Resource]: ...

    def by_uid(self, uids: Sequence[str]) -> dict[str, Resource]: ...

    def find(
        self,
        scope: Scope | None,
        *,
        kinds: Sequence[ResourceKind] = (),
        uri: str | None = None,
        uri_prefix: str | None = None,
        uid_prefix: str | None = None,
        meta: Mapping[str, str] | None = None,
        include_deleted: bool = False,
        limit: int | None = None,
    ) -> list[Resource]:
        """Resources of ``scope`` (None: every scope) matching every given condition, ordered
        by (scope, uri, resource_id)."""
        ...

    def select(
        self,
        scope: Scope,
        *,
        kinds: Sequence[ResourceKind] = (),
        item_kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        order_by: str | None = None,
        descending: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[int], int]:
        """A page of live resource ids that match ``where`` by their own fields or through
        any of their live items of ``item_kinds``, ordered by a catalog field (the largest
        value over their items for ``item.*`` fields; None: resource id), and the total."""
        ...

    def totals(
        self, scope: Scope | None, *, kinds: Sequence[ResourceKind] = ()
    ) -> ResourceTotals: ...

    def update(self, resource_id: int, update: ResourceUpdate) -> bool: ...

    def delete(self, resource_ids: Sequence[int]) -> int:
        """Delete resources with their items (and the items' index rows and edges); entities
        that pointed at a deleted resource keep existing with no resource."""
        ...

    def count(self, scope: Scope | None, *, kinds: Sequence[ResourceKind] = ()) -> int: ...


class GraphRepository(Protocol):
    """Entities, relations between entities and items, and observations on entities."""

    def ensure_entities(
        self, scope: Scope, entities: Sequence[NewEntity]
    ) -> dict[tuple[str, str], int]:
        """Ids of the entities by ``(kind, key)``, creating the missing ones."""
        ...

    def get_entities(self, entity_ids: Sequence[int]) -> dict[int, Entity]: ...

    def find_entities(
        self,
        scope: Scope,
        *,
        kinds: Sequence[str] = (),
        keys: Sequence[str] = (),
        resource_id: int | None = None,
        limit: int | None = None,
    ) -> list[Entity]: ...

    def update_entity(
        self,
        entity_id: int,
        *,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        resource_id: int | None = None,
    ) -> bool: ...

    def delete_entities(self, entity_ids: Sequence[int]) -> int:
        """Delete entities with their relations and observations."""
        ...

    def edges(
        self,
        scope: Scope,
        *,
        sources: Sequence[tuple[str, int]] = (),
        targets: Sequence[tuple[str, int]] = (),
        rel_types: Sequence[str] = (),
    ) -> set[Edge]:
        """Edges leaving any of ``sources`` or entering any of ``targets`` (both empty: all
        edges of the scope, for small graphs and exports), of the given types."""
        ...

    def apply_edges(self, scope: Scope, *, add: Iterable[Edge], remove: Iterable[Edge]) -> int:
        """Insert ``add`` (existing ones are kept) and delete ``remove``; returns rows added."""
        ...

    def orphans(self, scope: Scope, entity_ids: Iterable[int]) -> list[int]:
        """Those of ``entity_ids`` that no edge touches (the caller decides which to delete)."""
        ...

    def add_observations(self, scope: Scope, entity_id: int, texts: Sequence[str]) -> list[int]:
        """Append observations (an identical text on the same entity is not added twice)."""
        ...

    def observations(self, entity_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        """``entity_id -> [(observation_id, text)]`` in insertion order."""
        ...

    def delete_observations(self, observation_ids: Sequence[int]) -> int: ...

    def version(self, scope: Scope) -> int:
        """A counter bumped by :meth:`bump_version` (in-memory graph indexes key on it)."""
        ...

    def bump_version(self, scope: Scope) -> None: ...


class CategoryRepository(Protocol):
    """The category tree: level 1 has no parent, level n a parent at level n-1 in the scope;
    names are unique per parent by their normalised form (casefolded, spaces folded)."""

    def children(
        self, scope: Scope, parent_id: int | None, *, level: int | None = None
    ) -> list[Category]:
        """Children of ``parent_id`` (None: level-1 categories), ordered by name."""
        ...

    def all(self, scope: Scope) -> list[Category]: ...

    def get(self, category_ids: Sequence[int]) -> dict[int, Category]: ...

    def count(self, scope: Scope) -> int: ...

    def create(
        self,
        scope: Scope,
        *,
        parent_id: int | None,
        level: int,
        name: str,
        summary: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Category:
        """Create, or return the existing category with the same normalised name under the
        same parent (no twins, also under concurrent creators).

        Raises:
            InvalidInputError: bad name, or the level/parent combination is invalid.
        """
        ...

    def update(
        self,
        category_id: int,
        *,
        name: str | None = None,
        summary: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> bool: ...

    def delete(self, category_ids: Sequence[int]) -> int:
        """Delete categories that have no children; their items keep existing unfiled."""
        ...

    def item_counts(self, scope: Scope, *, kinds: Sequence[ItemKind] = ()) -> dict[int, int]:
        """Live items filed under each category (categories without items are absent)."""
        ...


class LogRepository(Protocol):
    """Runs (queries and pipeline runs with timings) and events (user actions, merges…)."""

    def record_run(
        self,
        scope: Scope,
        kind: str,
        *,
        took_ms: float | None,
        payload: Mapping[str, Any],
        started_at: str | None = None,
    ) -> int: ...

    def runs(self, scope: Scope, *, kinds: Sequence[str] = (), limit: int = 20) -> list[RunRecord]:
        """Newest first."""
        ...

    def prune_runs(self, scope: Scope, kind: str, *, keep: int) -> int:
        """Keep the newest ``keep`` runs of ``kind``; returns how many went."""
        ...

    def record_event(
        self,
        scope: Scope,
        kind: str,
        *,
        subject: str | None = None,
        payload: Mapping[str, Any] | None = None,
        created_at: str | None = None,
    ) -> int: ...

    def events(
        self,
        scope: Scope,
        *,
        kinds: Sequence[str] = (),
        since: str | None = None,
        limit: int = 100,
    ) -> list[EventRecord]:
        """Newest first."""
        ...


class TombstoneRepository(Protocol):
    """Markers of deleted things (a forgotten memory's digest, a removed document)."""

    def add(
        self,
        scope: Scope,
        kind: str,
        uid: str,
        *,
        expires_at: str | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> int: ...

    def find(
        self, scope: Scope, kind: str, uids: Sequence[str], *, now: str | None = None
    ) -> dict[str, Tombstone]:
        """Unexpired tombstones by uid (``now`` defaults to the current time)."""
        ...

    def purge(
        self,
        scope: Scope | None = None,
        *,
        kinds: Sequence[str] = (),
        expired_before: str | None = None,
    ) -> int:
        """Delete tombstones (all, or those of a scope / kinds / expired before a time)."""
        ...


class MetaRepository(Protocol):
    """Store-wide key/value settings: schema facts, embedder, counters."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...

    def all(self) -> dict[str, str]: ...

    def bump(self, key: str) -> int:
        """Increment an integer counter (created at 1) and return its new value."""
        ...


class Tx(Protocol):
    """One transaction's view of the store (read-only inside ``Store.read``)."""

    @property
    def items(self) -> ItemRepository: ...
    @property
    def lexical(self) -> LexicalIndex: ...
    @property
    def vectors(self) -> VectorIndex: ...
    @property
    def resources(self) -> ResourceRepository: ...
    @property
    def graph(self) -> GraphRepository: ...
    @property
    def categories(self) -> CategoryRepository: ...
    @property
    def log(self) -> LogRepository: ...
    @property
    def tombstones(self) -> TombstoneRepository: ...
    @property
    def meta(self) -> MetaRepository: ...


# -- the store -------------------------------------------------------------------------------


class Store(Protocol):
    """An open memoir store on one backend."""

    @property
    def backend(self) -> BackendName: ...

    @property
    def url(self) -> DatabaseURL: ...

    @property
    def scope_schema(self) -> ScopeSchema: ...

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The ports this backend implements (SQLite and PostgreSQL: all of them)."""
        ...

    async def open(self, *, create: bool = True) -> Store:
        """Connect, create or migrate the schema (idempotent).

        Raises:
            DatabaseUnavailableError, DatabaseCorruptError, SchemaError: the store is unusable.
        """
        ...

    async def close(self) -> None: ...

    async def read(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in one read transaction (a consistent snapshot) and return its result."""
        ...

    async def write(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in one write transaction: all of its writes commit, or none do.

        Writers are serialised per store (and across processes by the database); a transient
        lock is retried with jittered backoff, so ``fn`` may run more than once and must have
        no side effects outside the transaction.

        Raises:
            DatabaseLockedError: the database stayed locked past the busy timeout.
        """
        ...

    async def ensure_embedder(self, embedder_id: str, dimension: int) -> bool:
        """Record the embedder on a new store (creating the vector index), or check it.

        Returns:
            True when the vector index was created now.

        Raises:
            EmbedderMismatchError: the store was built with another embedder or dimension.
        """
        ...

    async def vector_search(
        self,
        vector: np.ndarray,
        scope: Scope | None,
        *,
        kinds: Sequence[ItemKind] = (),
        where: Filter | None = None,
        k: int = 50,
    ) -> VectorHits:
        """:meth:`VectorIndex.search` outside a caller's transaction, where the backend may
        use its own faster paths (SQLite: an in-process matrix kept fresh by the vector stamp;
        PostgreSQL: HNSW)."""
        ...

    async def similarities(
        self,
        vector: np.ndarray,
        item_ids: Sequence[int],
        *,
        scope: Scope | None = None,
        kinds: Sequence[ItemKind] = (),
    ) -> dict[int, float]:
        """Cosine similarity of ``vector`` to each stored item vector (items without one are
        absent); used to score candidates another arm found. ``scope`` / ``kinds`` say where
        the items live, so a backend can answer from an in-memory index."""
        ...

    async def prepare_vectors(self, scope: Scope | None, kinds: Sequence[ItemKind] = ()) -> bool:
        """Say that vector searches over ``scope`` / ``kinds`` are coming (a ranker just
        rebuilt its index): a backend may build an in-memory index now. True when one is
        ready; calling it is never required for correctness."""
        ...

    async def stats(self) -> StoreStats: ...

    async def diagnose(self, *, configured_embedder: str | None) -> list[DoctorFinding]:
        """Health checks of this store, each with its fix; never raises for a broken store."""
        ...

    async def reembed(
        self,
        embed: Callable[[list[str]], Awaitable[np.ndarray]],
        embedder_id: str,
        dimension: int,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Recompute every vector with ``embed``, rebuild the lexical and vector indexes and
        record the new embedder, swapping in one transaction; returns the items re-embedded."""
        ...

    async def compact(self) -> dict[str, Any]:
        """Reclaim space and optimise indexes (SQLite: VACUUM and FTS optimise)."""
        ...

    async def dump(self, scope: Scope | None, sink: Callable[[dict[str, Any]], None]) -> int:
        """Hand every row (of one scope, or all) to ``sink`` as a backup record of the
        ``memoir-store/1`` format (:mod:`memory_core.backup`), from one consistent snapshot, in
        a deterministic order; returns how many records. ``sink`` runs in a worker thread."""
        ...

    async def restore(self, records: Sequence[dict[str, Any]]) -> dict[str, int]:
        """Write one batch of backup records in one transaction (natural keys resolved against
        what is stored; rows already present are kept); returns rows written per type. Item
        records carry their vector as base64 float32 ``embedding`` (None: no vector)."""
        ...
