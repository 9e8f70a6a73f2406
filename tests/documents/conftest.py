"""Fixtures for the document tests: a real SQLite store (hashing embedder) in tmp_path."""

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


async def open_store(path: Path, embedder: str = "hash:384", **overrides: object) -> Memoir:
    return await Memoir.open(
        f"sqlite:///{path}",
        settings=load_settings(dict(overrides), cwd=path.parent, environ={}),
        embedder=create_embedder(embedder),
    )


@pytest.fixture
def store_factory() -> object:
    """``await store_factory(path, embedder="hash:384", **setting_overrides)``."""
    return open_store


@pytest.fixture
async def memoir(tmp_path: Path) -> AsyncIterator[Memoir]:
    store = await open_store(tmp_path / "m.db")
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "api").mkdir(parents=True)
    (root / "ops").mkdir()
    (root / "api" / "limits.md").write_text(
        "# Rate limits\n\nThe API returns 429 when the rate limit is exceeded. "
        "Clients retry with exponential backoff.\n",
        encoding="utf-8",
    )
    (root / "api" / "auth.md").write_text(
        "# S3 auth\n\nRequests are signed with SigV4 using the access key.\n", encoding="utf-8"
    )
    (root / "ops" / "deploy.md").write_text(
        "# Deploys\n\nZero-downtime deploy uses blue green switching and health checks.\n",
        encoding="utf-8",
    )
    (root / "ops" / "notes.txt").write_text(
        "Runbook: recovery after an outage.\n", encoding="utf-8"
    )
    return root
