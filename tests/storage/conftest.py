"""One storage contract suite, run against every backend that implements the ports.

``store`` is an open :class:`~memory_core.storage.ports.Store` on a fresh database with a
vector index of dimension :data:`DIM`. Backends are added to :data:`STORE_BACKENDS` with an
opener in :func:`open_test_store`; a backend whose service is unavailable FAILS under
``CI=true`` (CI must not go green by skipping) and is skipped otherwise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from store_testkit import DIM, STORE_BACKENDS

from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.ports import Store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def open_test_store(backend: str, tmp_path: Path) -> Store:
    if backend == "sqlite":
        store = await open_store(f"sqlite:///{tmp_path / 'contract.db'}")
    else:  # pragma: no cover - a backend listed without an opener
        raise AssertionError(f"no opener for {backend}")
    await store.ensure_embedder("hash:contract", DIM)
    return store


@pytest.fixture
def store_factory(
    request: pytest.FixtureRequest,
) -> Callable[[Path], Awaitable[Store]]:
    """Opens another, empty store of the same backend as ``store`` (in the given folder)."""
    backend = request.node.callspec.params["store"]
    return lambda folder: open_test_store(backend, folder)


@pytest.fixture(params=STORE_BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_test_store(request.param, tmp_path)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def scope() -> Scope:
    return Scope.of("project:/contract/a")


@pytest.fixture
def other_scope() -> Scope:
    return Scope.of("project:/contract/b")
