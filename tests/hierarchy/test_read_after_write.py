"""Read-your-team's-writes for knowledge: two ``Memoir`` facades on one database stand for two
server processes (each has its own in-process state: the offline model, the category centroid
cache). A chunk one of them acknowledged is found by the other's next query.

Found by tests/server/test_team_server.py under load: a query missed a chunk another server
had just stored when some category of the tree had no chunk yet (another writer's ingest had
created it and not filled it, or created it after the query read the centroids). The offline
``select`` then ranked every category by its name instead of its content.
"""

from __future__ import annotations

import random
import string
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.hierarchy.filing import offline_tree_for
from memory_core.scope import Scope
from memory_core.service import Memoir

try:
    from conftest_backends import BACKENDS, anyio_backend, backend_url, require_service
except ImportError:  # pragma: no cover - tests/hierarchy became a package
    from hierarchy.conftest_backends import (  # type: ignore[no-redef]
        BACKENDS,
        anyio_backend,
        backend_url,
        require_service,
    )

__all__ = ["anyio_backend"]

pytestmark = pytest.mark.anyio

TOPICS = 6
Opener = Callable[[str], Awaitable[tuple[Memoir, Memoir]]]


@pytest.fixture
async def two_processes(tmp_path: Path) -> AsyncIterator[Opener]:
    """``await two_processes(backend)`` → two facades on one fresh database (their own
    stores, pools and caches), closed afterwards."""
    opened: list[Memoir] = []

    async def opener(backend: str) -> tuple[Memoir, Memoir]:
        require_service(backend)
        url = backend_url(backend, tmp_path)
        pair = []
        for n in range(2):
            folder = tmp_path / f"process{n}"
            folder.mkdir()
            settings = load_settings(None, cwd=folder, environ={"MEMOIR_DATABASE_URL": url})
            memoir = await Memoir.open(url, settings=settings, embedder=create_embedder("hash:384"))
            opened.append(memoir)
            pair.append(memoir)
        return pair[0], pair[1]

    try:
        yield opener
    finally:
        for memoir in opened:
            await memoir.hierarchy.close()
            await memoir.close()


def _text(rng: random.Random, marker: str) -> str:
    words = ("".join(rng.choices(string.ascii_lowercase, k=rng.randint(6, 9))) for _ in range(30))
    return f"Knowledge {marker}: " + " ".join(words) + "."


async def _finds(memoir: Memoir, scope: Scope, marker: str, text: str) -> bool:
    result = await memoir.hierarchy.query(text, scope=scope, max_token_budget=4000)
    return marker in (result.answer or "") + " ".join(u.text_content for u in result.used_chunks)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_empty_category_does_not_hide_another_writers_chunks(
    backend: str, two_processes: Opener
) -> None:
    writer, reader = await two_processes(backend)
    scope = Scope.of(f"project:/tmp/read-after-write-{backend}")
    rng = random.Random(10)
    written: list[tuple[str, str]] = []
    for n in range(2 * TOPICS):
        marker = f"qkno{n:02d}x"
        text = _text(rng, marker)
        category = f"Team / Notes / Topic {string.ascii_lowercase[n % TOPICS]}"
        result = await writer.hierarchy.ingest_text(text, scope=scope, category=category)
        assert result.status == "ok" and len(result.chunks) == 1, result
        written.append((marker, text))
    # Another writer's ingest in flight: its category exists, its chunk is not stored yet.
    store = await reader.hierarchy.store()
    notes = [c for c in await store.all_categories(scope) if c.name == "Notes"]
    await store.create_category(scope, parent_id=notes[0].category_id, level=3, name="Topic z")

    missed = [m for m, text in written if not await _finds(reader, scope, m, text)]
    assert missed == [], f"the reader missed acknowledged chunks: {missed}"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_centroid_cache_key_changes_with_another_writers_forget(
    backend: str, two_processes: Opener
) -> None:
    """The reader's centroids are cached under a key read from the database; it must change
    with every write of another process that changes what the centroids hold (a forget
    records no ingest run)."""
    writer, reader = await two_processes(backend)
    scope = Scope.of(f"project:/tmp/centroid-key-{backend}")
    rng = random.Random(11)
    for n in range(3):
        await writer.hierarchy.ingest_text(
            _text(rng, f"qkno{n:02d}x"), scope=scope, category="Team / Notes / Topic a"
        )
    tree = offline_tree_for(await reader.hierarchy.store(), reader.hierarchy.settings)
    assert tree is not None
    before = await tree.signature(scope)
    ingested = await writer.hierarchy.ingest_text(
        _text(rng, "qkno99x"), scope=scope, category="Team / Notes / Topic a"
    )
    added = await tree.signature(scope)
    assert added != before
    await writer.hierarchy.forget(scope=scope, chunk_ids=[ingested.chunks[0].chunk_id])
    assert await tree.signature(scope) != added
