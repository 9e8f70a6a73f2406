"""Fixtures for the memory-layer tests: one suite over the in-memory and SQLite stores.

Real stores (SQLite files in tmp_path), the deterministic hashing embedder, and pydantic-ai
fakes only (real model requests are forbidden).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest

from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer import InMemoryLayerStore
from tests.pipeline.layer_kit import CATEGORIES, OrgScope


@pytest.fixture(autouse=True)
def no_real_model_requests() -> Iterator[None]:
    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    yield
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


ServiceFactory = Callable[..., MemoryService]


@pytest.fixture
def make_service(backend: str, tmp_path: Path) -> Iterator[ServiceFactory]:
    """``make_service(**overrides)``: a service on this test's store; calling it again reopens
    the same store (the same SQLite file, or the same in-memory instance)."""
    memory_store = InMemoryLayerStore()
    opened: list[MemoryService] = []

    def factory(**overrides: Any) -> MemoryService:
        vector = overrides.pop("vector_index", None)
        if backend == "memory":
            metadata: Any = memory_store
        else:
            metadata = {"provider": "sqlite", "path": str(tmp_path / "layer.db")}
        storage: dict[str, Any] = {"metadata_store": metadata}
        if vector is not None:
            storage["vector_index"] = {"provider": vector}
        kwargs: dict[str, Any] = {
            "scope_model": OrgScope,
            "categories": CATEGORIES,
            "storage_providers": storage,
            "boundary_fields": ["org_id"],
            "embedder": "hash:256",
            **overrides,
        }
        service = MemoryService.create(**kwargs)
        opened.append(service)
        return service

    yield factory
    if backend == "sqlite":
        for service in opened:
            service.close()
