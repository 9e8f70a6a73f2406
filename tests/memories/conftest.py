"""Fixtures for the agent-memory tests: a real SQLite store (hashing embedder) in tmp_path,
LLM requests forbidden (pydantic-ai fakes only)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest
from memory_testkit import open_memoir

from memory_core.service import Memoir


@pytest.fixture(autouse=True)
def no_real_model_requests() -> Iterator[None]:
    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    yield
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def memoir(tmp_path: Path) -> AsyncIterator[Memoir]:
    opened = await open_memoir(tmp_path / "m.db")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def memoir_factory(tmp_path: Path) -> AsyncIterator[Any]:
    """``await memoir_factory(name, embedder=…, **memories_settings)``: a store in tmp_path,
    closed after the test."""
    opened: list[Memoir] = []

    async def make(name: str = "other.db", **kwargs: Any) -> Memoir:
        store = await open_memoir(tmp_path / name, **kwargs)
        opened.append(store)
        return store

    try:
        yield make
    finally:
        for store in opened:
            await store.close()
