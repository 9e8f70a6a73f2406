"""The memoirAI API (``ingest_text`` / ``query`` / categories / runs) on all three backends.

Everything goes through ``Memoir.open(url)`` with the built-in offline model, on a real text
(Chapter I of *Alice's Adventures in Wonderland*, see ``tests/data/SOURCES.md``). The offline
model is deterministic, so PostgreSQL and MySQL must give exactly what SQLite gives: the same
tree, the same chunks in the same order, the same answers, the same dropped paths.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.hierarchy.results import CategoryNode, QueryResult
from memory_core.service import Memoir, MemoirSync
from memory_core.storage.url import parse_database_url

try:
    from conftest_backends import (
        BACKENDS,
        SERVER_BACKENDS,
        admin_execute,
        anyio_backend,
        backend_url,
        require_service,
        unique_scope,
    )
except ImportError:  # pragma: no cover - tests/hierarchy became a package
    from hierarchy.conftest_backends import (  # type: ignore[no-redef]
        BACKENDS,
        SERVER_BACKENDS,
        admin_execute,
        anyio_backend,
        backend_url,
        require_service,
        unique_scope,
    )

__all__ = ["anyio_backend"]

pytestmark = pytest.mark.anyio

ALICE = (Path(__file__).parent.parent / "data" / "alice_chapter1.txt").read_text(encoding="utf-8")
STRATEGIES = ["one_shot", "wide_branch", "zoom_in", "branch_out"]
QUESTION = "What did Alice find in the little bottle and what happened when she drank it?"

Opener = Callable[..., Awaitable[Memoir]]


def _settings(tmp_path: Path, url: str | None = None, **hierarchy: Any) -> Any:
    environ = {"MEMOIR_DATABASE_URL": url} if url else {}
    return load_settings(
        {"hierarchy": hierarchy} if hierarchy else None, cwd=tmp_path, environ=environ
    )


@pytest.fixture
async def open_memoir(tmp_path: Path) -> AsyncIterator[Opener]:
    """``await open_memoir(backend, scope, **hierarchy_settings)`` → an open Memoir.

    Server-side rows of every scope used are deleted afterwards, and every store is closed.
    """
    opened: list[tuple[Memoir, str]] = []

    async def opener(backend: str, scope: str, **hierarchy: Any) -> Memoir:
        require_service(backend)
        folder = tmp_path / f"{backend}-{len(opened)}"
        folder.mkdir()
        memoir = await Memoir.open(
            backend_url(backend, folder),
            settings=_settings(folder, **hierarchy),
            embedder=create_embedder("hash:384"),
        )
        opened.append((memoir, scope))
        return memoir

    try:
        yield opener
    finally:
        for memoir, scope in opened:
            store = await memoir.hierarchy.store()
            if hasattr(store, "delete_scope"):
                await store.delete_scope(scope)
            await memoir.hierarchy.close()
            await memoir.close()


def _shape(nodes: list[CategoryNode]) -> list[tuple[Any, ...]]:
    return [(n.name, n.level, n.chunk_count, _shape(n.children)) for n in nodes]


def _leaves(nodes: list[CategoryNode]) -> list[CategoryNode]:
    out: list[CategoryNode] = []
    for node in nodes:
        out += _leaves(node.children) if node.children else [node]
    return out


def _comparable(result: QueryResult) -> dict[str, Any]:
    """What must be identical across backends (timestamps and latencies differ by nature)."""
    return {
        "status": result.status,
        "answer": result.answer,
        "used": [
            (u.chunk_id, u.text_content, u.category_path, u.ranked_relevance, u.chosen_strategy)
            for u in result.used_chunks
        ],
        "citations": [(c.chunk_id, c.category_path) for c in result.citations],
        "dropped_paths": result.dropped_paths,
        "explored_paths": result.explored_paths,
        "empty_leaves": result.empty_leaves,
        "candidate_tokens": result.candidate_tokens,
        "summarized": result.summarized,
        "parts": result.parts,
    }


# -- the same behaviour on every backend -------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
async def test_ingest_then_query_answers_from_the_text_with_every_strategy(
    backend: str, open_memoir: Opener
) -> None:
    scope = unique_scope("svc")
    memoir = await open_memoir(backend, scope)
    ingested = await memoir.ingest_text(ALICE, scope=scope, source="alice_chapter1.txt")
    assert ingested.status == "ok" and len(ingested.chunks) >= 5
    assert ingested.model_used == {"classify": ["memoir-offline:clusters"]}
    assert all(len(c.category_path.split(" / ")) == 3 for c in ingested.chunks)
    for strategy in STRATEGIES:
        result = await memoir.query(QUESTION, scope=scope, strategy=strategy)
        assert result.status == "ok", result.error
        assert result.strategy == strategy and result.answer
        assert result.used_chunks, strategy
        for used in result.used_chunks:
            assert used.text_content in ALICE
            assert used.chosen_strategy == strategy
            assert len(used.category_path.split(" / ")) == 3
        assert {c.chunk_id for c in result.citations} <= {u.chunk_id for u in result.used_chunks}
        assert result.run_id is not None
    runs = await memoir.hierarchy.runs(scope=scope, kind="hierarchy_query")
    assert [r["payload"]["strategy"] for r in runs] == list(reversed(STRATEGIES))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_reingesting_the_same_text_stores_nothing_and_calls_no_model(
    backend: str, open_memoir: Opener
) -> None:
    scope = unique_scope("svc")
    memoir = await open_memoir(backend, scope)
    first = await memoir.ingest_text(ALICE, scope=scope)
    tree_before = _shape((await memoir.hierarchy.categories(scope=scope)).nodes)
    again = await memoir.ingest_text(ALICE, scope=scope)
    assert again.llm_calls == 0
    assert all(c.already_stored for c in again.chunks)
    assert [c.item_id for c in again.chunks] == [c.item_id for c in first.chunks]
    assert _shape((await memoir.hierarchy.categories(scope=scope)).nodes) == tree_before


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_category_tree_has_its_chunks_on_leaves_at_the_configured_depth(
    backend: str, open_memoir: Opener
) -> None:
    scope = unique_scope("svc")
    memoir = await open_memoir(backend, scope, depth=2)
    ingested = await memoir.ingest_text(ALICE, scope=scope)
    tree = await memoir.hierarchy.categories(scope=scope)
    leaves = _leaves(tree.nodes)
    assert tree.depth == 2 and all(leaf.level == 2 for leaf in leaves)
    assert sum(leaf.chunk_count or 0 for leaf in leaves) == len(ingested.chunks)
    store = await memoir.hierarchy.store()
    assert tree.total == await store.count_categories(scope)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_global_category_cap_holds(backend: str, open_memoir: Opener) -> None:
    scope = unique_scope("svc")
    memoir = await open_memoir(
        backend, scope, depth=2, max_categories=4, min_chunk_chars=300, max_chunk_chars=600
    )
    ingested = await memoir.ingest_text(ALICE, scope=scope)
    assert ingested.status == "ok" and len(ingested.chunks) > 4
    store = await memoir.hierarchy.store()
    assert await store.count_categories(scope) <= 4


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_small_budget_stops_reading_and_reports_the_dropped_paths(
    backend: str, open_memoir: Opener
) -> None:
    scope = unique_scope("svc")
    memoir = await open_memoir(backend, scope, min_chunk_chars=300, max_chunk_chars=600)
    await memoir.ingest_text(ALICE, scope=scope)
    budget = 200
    stopped = await memoir.query(
        QUESTION, scope=scope, strategy="branch_out", max_token_budget=budget, summarize=False
    )
    assert stopped.status == "ok"
    assert sum(u.token_count for u in stopped.used_chunks) <= budget
    assert stopped.dropped_paths  # the rest of the selected leaves were never read
    summarized = await memoir.query(
        QUESTION, scope=scope, strategy="branch_out", max_token_budget=budget, summarize=True
    )
    assert summarized.status == "ok"
    assert summarized.candidate_tokens > budget  # every selected leaf is read, then split
    assert summarized.summarized and not summarized.dropped_paths
    assert summarized.parts == math.ceil(summarized.candidate_tokens / budget)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_memoir_database_url_selects_the_backend(backend: str, tmp_path: Path) -> None:
    require_service(backend)
    url = backend_url(backend, tmp_path)
    memoir = await Memoir.open(
        settings=_settings(tmp_path, url), embedder=create_embedder("hash:384")
    )
    try:
        store = await memoir.hierarchy.store()
        assert (
            store.backend
            == {"sqlite": "sqlite", "postgres": "postgresql", "mysql": "mysql"}[backend]
        )
    finally:
        await memoir.hierarchy.close()
        await memoir.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_synchronous_api_ingests_and_answers(backend: str, tmp_path: Path) -> None:
    require_service(backend)
    scope = unique_scope("sync")
    memoir = MemoirSync(
        backend_url(backend, tmp_path),
        settings=_settings(tmp_path),
        embedder=create_embedder("hash:384"),
    )
    try:
        ingested = memoir.ingest_text(ALICE, scope=scope)
        assert ingested.status == "ok" and ingested.chunks
        result = memoir.query(QUESTION, scope=scope)
        assert result.status == "ok" and result.used_chunks
    finally:
        store = memoir.hierarchy.store()
        if hasattr(store, "delete_scope"):
            memoir._portal.call(store.delete_scope, scope)
        memoir.hierarchy.close()
        memoir.close()


# -- PostgreSQL and MySQL give exactly what SQLite gives -----------------------------------


@pytest.mark.parametrize("backend", SERVER_BACKENDS)
@pytest.mark.parametrize("depth", [1, 3])
async def test_a_server_backend_gives_exactly_what_sqlite_gives(
    backend: str, depth: int, open_memoir: Opener
) -> None:
    # One scope for both: chunk ids are derived from scope + text, so they must match too.
    scope = unique_scope("same")
    options = {"depth": depth, "min_chunk_chars": 400, "max_chunk_chars": 800}
    reference = await open_memoir("sqlite", scope, **options)
    server = await open_memoir(backend, scope, **options)
    ref_ingest = await reference.ingest_text(ALICE, scope=scope)
    got_ingest = await server.ingest_text(ALICE, scope=scope)
    assert [(c.chunk_id, c.category_path, c.token_count) for c in got_ingest.chunks] == [
        (c.chunk_id, c.category_path, c.token_count) for c in ref_ingest.chunks
    ]
    assert _shape((await server.hierarchy.categories(scope=scope)).nodes) == _shape(
        (await reference.hierarchy.categories(scope=scope)).nodes
    )
    for strategy in STRATEGIES:
        for budget, summarize in ((4000, False), (150, False), (150, True)):
            kwargs = {"strategy": strategy, "max_token_budget": budget, "summarize": summarize}
            expected = await reference.query(QUESTION, scope=scope, **kwargs)
            got = await server.query(QUESTION, scope=scope, **kwargs)
            assert _comparable(got) == _comparable(expected), (strategy, budget, summarize)


@pytest.mark.parametrize("backend", SERVER_BACKENDS)
async def test_a_query_after_the_server_dropped_the_connection_still_answers(
    backend: str, open_memoir: Opener
) -> None:
    scope = unique_scope("drop")
    memoir = await open_memoir(backend, scope)
    await memoir.ingest_text(ALICE, scope=scope)
    url = parse_database_url(backend_url(backend))
    # The store's pool of connections: the server drops all of them.
    if backend == "postgres":
        killed = admin_execute(
            backend,
            url,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        assert killed[0][0] >= 1
    else:
        sessions = admin_execute(
            backend,
            url,
            "SELECT id FROM information_schema.processlist "
            "WHERE db = DATABASE() AND id <> CONNECTION_ID()",
        )
        assert sessions
        for (session,) in sessions:
            admin_execute(backend, url, f"KILL {int(session)}")
    result = await memoir.query(QUESTION, scope=scope, strategy="wide_branch")
    assert result.status == "ok" and result.used_chunks
    assert memoir.context.store.db.reconnects == 1  # type: ignore[attr-defined]
