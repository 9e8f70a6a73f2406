"""Fixtures for the retrieval tests: a real SQLite store with the hashing embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.service import Memoir


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def memoir(tmp_path: Path) -> AsyncIterator[Memoir]:
    store = await Memoir.open(
        f"sqlite:///{tmp_path}/m.db",
        settings=load_settings(cwd=tmp_path, environ={}),
        embedder=create_embedder("hash:384"),
    )
    try:
        yield store
    finally:
        await store.close()
