"""Streamed ingest and knowledge removal on every backend (SQLite, PostgreSQL, MySQL/MariaDB):
all three run the hierarchy on the store's ports, so all three stream and remove alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.service import Memoir

from .test_ingest_stream import topic_text

try:
    from conftest_backends import (
        BACKENDS,
        anyio_backend,
        backend_url,
        require_service,
        unique_scope,
    )
except ImportError:  # pragma: no cover - imported as a package
    from .conftest_backends import (
        BACKENDS,
        anyio_backend,
        backend_url,
        require_service,
        unique_scope,
    )

__all__ = ["anyio_backend"]
pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_streamed_ingest_is_stored_and_removed_on_every_backend(
    backend: str, tmp_path: Path
) -> None:
    require_service(backend)
    scope = unique_scope("stream")
    settings = load_settings({"hierarchy": {"ingest_batch_bytes": 8192}}, cwd=tmp_path, environ={})
    memoir = await Memoir.open(
        backend_url(backend, tmp_path), settings=settings, embedder=create_embedder("hash:384")
    )
    try:
        text = topic_text(40_000, seed=5)
        result = await memoir.hierarchy.ingest_text(text, scope=scope, source="big.md")
        tree = await memoir.hierarchy.categories(scope=scope)
        assert result.stream is not None and result.stream.batches >= 5
        assert result.stream.new_chunks == result.stream.chunks > 20
        assert tree.total > 0
        again = await memoir.hierarchy.ingest_text(text, scope=scope, source="big.md")
        assert again.stream is not None and again.stream.new_chunks == 0
        removed = await memoir.hierarchy.forget(scope=scope, source="big.md")
        assert removed.chunks == result.stream.new_chunks
        assert (await memoir.hierarchy.categories(scope=scope)).total == 0
    finally:
        store = await memoir.hierarchy.store()
        if hasattr(store, "delete_scope"):
            await store.delete_scope(scope)
        await memoir.hierarchy.close()
        await memoir.close()
