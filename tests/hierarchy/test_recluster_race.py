"""An offline re-clustering by one process while another files a chunk (two ``Memoir`` facades
on one database, as two server processes).

The ingest picks a leaf, then stores its chunk in a later transaction. A re-clustering that
commits in between may replace that leaf (its chunks move to the new tree, the emptied leaf is
deleted): the ingest used to fail with ``category N is missing``. Now it files the chunk again
in the tree as it is, and the chunk is stored once, under a leaf that exists.

The interleaving is made exact by the writer's own store: a real store on the same database
whose ``add_chunks`` first lets the other process re-cluster (once).
"""

from __future__ import annotations

import random
import string
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.hierarchy.port_store import PortHierarchyStore
from memory_core.hierarchy.service import HierarchyService
from memory_core.scope import Scope
from memory_core.service import Memoir

try:
    from conftest_backends import anyio_backend, backend_url, require_service
except ImportError:  # pragma: no cover - tests/hierarchy became a package
    from hierarchy.conftest_backends import (  # type: ignore[no-redef]
        anyio_backend,
        backend_url,
        require_service,
    )

__all__ = ["anyio_backend"]

pytestmark = pytest.mark.anyio

RACE_BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mysql", marks=pytest.mark.mysql),
]


class ReclusterFirst(PortHierarchyStore):
    """The writer's store: before its first ``add_chunks`` (or ``add_batch``, streamed),
    ``before`` runs (the other process re-clusters) and the categories it was about to file
    into are remembered."""

    def __init__(self, inner: PortHierarchyStore, before: Callable[[], Awaitable[None]]) -> None:
        super().__init__(inner.store, depth=inner.depth)
        self.before: Callable[[], Awaitable[None]] | None = before
        self.raced: list[int] = []

    async def _race(self, category_ids: Sequence[int]) -> None:
        if self.before is not None:
            before, self.before = self.before, None
            self.raced.extend(category_ids)
            await before()

    async def add_chunks(
        self, scope: Scope, category_id: int, chunks: Sequence[Any], vectors: Any | None = None
    ) -> list[int]:
        await self._race([category_id])
        return await super().add_chunks(scope, category_id, chunks, vectors)

    async def add_batch(
        self,
        scope: Scope,
        filed: Sequence[tuple[int, Any]],
        vectors: Any | None,
        *,
        resource_id: int,
        progress: dict[str, Any],
    ) -> list[int]:
        await self._race([category_id for category_id, _ in filed])
        return await super().add_batch(
            scope, filed, vectors, resource_id=resource_id, progress=progress
        )


def _text(rng: random.Random, topic: list[str]) -> str:
    words = rng.sample(topic, 12) + rng.choices(string.ascii_lowercase, k=3)
    return " ".join(words).capitalize() + "."


@pytest.fixture
async def two_processes(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[list[Memoir]]]]:
    """``await two_processes(backend, **hierarchy_settings)`` → two facades on one database."""
    opened: list[Memoir] = []

    async def opener(backend: str, **hierarchy: Any) -> list[Memoir]:
        require_service(backend)
        url = backend_url(backend, tmp_path) if backend != "sqlite" else None
        url = url or f"sqlite:///{tmp_path / 'shared.db'}"
        for n in range(2):
            folder = tmp_path / f"process{n}"
            folder.mkdir()
            settings = load_settings(
                {"hierarchy": hierarchy} if hierarchy else None,
                cwd=folder,
                environ={"MEMOIR_DATABASE_URL": url},
            )
            opened.append(
                await Memoir.open(url, settings=settings, embedder=create_embedder("hash:384"))
            )
        return opened

    try:
        yield opener
    finally:
        for memoir in opened:
            await memoir.hierarchy.close()
            await memoir.close()


async def _racing_writer(
    first: Memoir, second: Memoir, scope: Scope
) -> tuple[HierarchyService, ReclusterFirst, set[int], list[list[str]]]:
    """A managed tree over two topics written by ``first``; a writer on ``second`` whose first
    store write lets ``first`` grow the tree and re-cluster it (every leaf renamed)."""
    rng = random.Random(5)
    topics = [
        ["".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(20)] for _ in range(4)
    ]
    for n in range(6):
        await first.hierarchy.ingest_text(_text(rng, topics[n % 2]), scope=scope)
    before = {c.category_id for c in await (await first.hierarchy.store()).all_categories(scope)}

    async def other_process_reclusters() -> None:
        # More of both topics, in new words that every new chunk repeats, then a
        # re-clustering: the leaves are named anew, the old ones emptied and deleted.
        for n in range(12):
            fresh = " ".join(topics[2 + n % 2][:8])
            text = _text(rng, topics[n % 2])
            await first.hierarchy.ingest_text(f"{fresh} {text} {fresh}", scope=scope)
        await first.hierarchy.recluster(scope=scope)

    inner = await second.hierarchy.store()
    assert isinstance(inner, PortHierarchyStore)
    racing = ReclusterFirst(inner, other_process_reclusters)
    return HierarchyService(second.hierarchy.ctx, store=racing), racing, before, topics


async def _assert_filed_once(
    memoir: Memoir, scope: Scope, racing: ReclusterFirst, before: set[int], result: Any
) -> None:
    store = await memoir.hierarchy.store()
    now = {c.category_id for c in await store.all_categories(scope)}
    assert racing.raced and set(racing.raced) <= before
    assert not set(racing.raced) & now, "the re-clustering must have replaced the leaves"
    assert result.status == "ok", result.error
    for chunk in result.chunks:
        assert chunk.category_id in now
        stored = await store.chunks_in_category(scope, chunk.category_id, limit=1000)
        assert [c.uid for c in stored].count(chunk.chunk_id) == 1


@pytest.mark.parametrize("backend", RACE_BACKENDS)
async def test_an_ingest_survives_a_recluster_that_replaced_its_leaf(
    backend: str, two_processes: Callable[..., Awaitable[list[Memoir]]]
) -> None:
    first, second = await two_processes(backend)
    scope = Scope.of(f"project:/tmp/recluster-race-{backend}")
    writer, racing, before, topics = await _racing_writer(first, second, scope)
    result = await writer.ingest_text(_text(random.Random(6), topics[0]), scope=scope)
    assert len(result.chunks) == 1
    await _assert_filed_once(second, scope, racing, before, result)


@pytest.mark.parametrize("backend", RACE_BACKENDS)
async def test_a_streamed_ingest_survives_a_recluster_that_replaced_its_leaves(
    backend: str, two_processes: Callable[..., Awaitable[list[Memoir]]]
) -> None:
    first, second = await two_processes(backend, ingest_batch_bytes=1024)
    scope = Scope.of(f"project:/tmp/recluster-race-stream-{backend}")
    writer, racing, before, topics = await _racing_writer(first, second, scope)
    rng = random.Random(7)
    text = " ".join(_text(rng, topics[n % 2]) for n in range(40))
    result = await writer.ingest_text(text, scope=scope)
    assert result.stream is not None and result.stream.batches > 1
    await _assert_filed_once(second, scope, racing, before, result)


@pytest.mark.postgres
async def test_a_leaf_deleted_while_a_chunk_is_written_into_it_reads_as_missing(
    two_processes: Callable[..., Awaitable[list[Memoir]]],
) -> None:
    """The narrower window on PostgreSQL: the re-clustering deletes the leaf while the ingest's
    insert is waiting on it. The insert then fails on the foreign key; the transaction runs
    again, finds the category missing and says so (the ingest files the chunk again), instead
    of a storage error."""
    import anyio
    import psycopg

    from memory_core.errors import CategoryMissingError
    from memory_core.hierarchy.store import NewChunk

    (memoir, _) = await two_processes("postgres")
    scope = Scope.of("project:/tmp/fk-race")
    store = await memoir.hierarchy.store()
    leaf = await _one_leaf(store, scope)
    chunk = NewChunk(uid="u-fk", text="a chunk", token_count=2, content_hash="h-fk", created_at="")
    assert isinstance(store, PortHierarchyStore)
    other = psycopg.connect(store.store.db.conninfo)  # type: ignore[attr-defined]
    try:
        other.execute("BEGIN")
        other.execute("DELETE FROM category WHERE category_id = %s", (leaf,))
        outcome: list[Exception | None] = []

        async def write() -> None:
            try:
                await store.add_chunks(scope, leaf, [chunk])
                outcome.append(None)
            except Exception as exc:  # the outcome is what the test asserts
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            with anyio.fail_after(30):  # the insert waits on the deleted row's lock
                while not other.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                ).fetchone()[0]:
                    await anyio.sleep(0.02)
            other.execute("COMMIT")
        assert len(outcome) == 1 and isinstance(outcome[0], CategoryMissingError), outcome
    finally:
        other.close()


async def _one_leaf(store: Any, scope: Scope) -> int:
    """A chain of categories named "x" from level 1 down to a leaf; the leaf's id."""
    parent = None
    for level in range(1, store.depth + 1):
        parent = await store.create_category(
            scope, parent_id=None if parent is None else parent.category_id, level=level, name="x"
        )
    assert parent is not None
    return int(parent.category_id)


async def _mysql_outcome_behind_a_delete(
    store: PortHierarchyStore, category_id: int, table: str, work: Callable[[], Awaitable[Any]]
) -> Exception | None:
    """What ``work`` ends with when another connection deletes category ``category_id`` in an
    open transaction, ``work``'s INSERT into ``table`` waits on that row's lock, and then the
    delete commits (None: it succeeded)."""
    import anyio

    try:
        from conftest_backends import admin_connection
    except ImportError:  # pragma: no cover - tests/hierarchy became a package
        from hierarchy.conftest_backends import admin_connection  # type: ignore[no-redef]

    other = admin_connection("mysql", store.store.db.url)  # type: ignore[attr-defined]
    watcher = admin_connection("mysql", store.store.db.url)  # type: ignore[attr-defined]
    outcome: list[Exception | None] = []

    async def run() -> None:
        try:
            await work()
            outcome.append(None)
        except Exception as exc:  # the outcome is what the caller asserts
            outcome.append(exc)

    try:
        with other.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("DELETE FROM category WHERE category_id = %s", (category_id,))
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(30):  # the insert waits on the deleted row's lock
                while True:
                    with watcher.cursor() as cur:
                        cur.execute(
                            "SELECT count(*) FROM information_schema.processlist "
                            f"WHERE info LIKE 'INSERT%%INTO {table} %%' AND state = 'Update'"
                        )
                        if cur.fetchone()[0]:
                            break
                    await anyio.sleep(0.02)
                await anyio.sleep(0.2)  # inside the lock wait, not merely started
            with other.cursor() as cur:
                cur.execute("COMMIT")
    finally:
        other.close()
        watcher.close()
    assert len(outcome) == 1, outcome
    return outcome[0]


@pytest.mark.mysql
async def test_on_mysql_a_leaf_deleted_while_a_chunk_is_written_into_it_reads_as_missing(
    two_processes: Callable[..., Awaitable[list[Memoir]]],
) -> None:
    """The same narrow window on MySQL/MariaDB: the insert waits on the deleted leaf's row
    lock, then fails its foreign key (1452); the transaction runs again and reports the
    category missing (the ingest files the chunk again), not a storage error."""
    from memory_core.errors import CategoryMissingError
    from memory_core.hierarchy.store import NewChunk

    (memoir, _) = await two_processes("mysql")
    scope = Scope.of("project:/tmp/fk-race-mysql")
    store = await memoir.hierarchy.store()
    leaf = await _one_leaf(store, scope)
    chunk = NewChunk(
        uid="u-fk-my", text="a chunk", token_count=2, content_hash="h-fk-my", created_at=""
    )
    assert isinstance(store, PortHierarchyStore)
    error = await _mysql_outcome_behind_a_delete(
        store, leaf, "item", lambda: store.add_chunks(scope, leaf, [chunk])
    )
    assert isinstance(error, CategoryMissingError), error


@pytest.mark.mysql
async def test_on_mysql_a_subcategory_whose_parent_is_deleted_meanwhile_is_refused(
    two_processes: Callable[..., Awaitable[list[Memoir]]],
) -> None:
    """A child category created while another connection deletes its parent: the insert
    waits on the parent's row lock, then fails its foreign key; the transaction runs again
    and says the parent does not exist (as on PostgreSQL). ``INSERT IGNORE`` used to turn
    the foreign-key failure into a warning: no row, and an ``AssertionError`` after it."""
    from memory_core.errors import InvalidInputError

    (memoir, _) = await two_processes("mysql")
    scope = Scope.of("project:/tmp/fk-parent-mysql")
    store = await memoir.hierarchy.store()
    top = await store.create_category(scope, parent_id=None, level=1, name="top")
    assert isinstance(store, PortHierarchyStore)
    error = await _mysql_outcome_behind_a_delete(
        store,
        top.category_id,
        "category",
        lambda: store.create_category(scope, parent_id=top.category_id, level=2, name="child"),
    )
    assert isinstance(error, InvalidInputError), error
    assert "does not exist" in str(error)
