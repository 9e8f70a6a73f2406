"""One storage contract suite, run against every backend that implements the ports.

``store`` is an open :class:`~memory_core.storage.ports.Store` on a fresh database with a
vector index of dimension :data:`DIM`. Backends are added to :data:`STORE_BACKENDS` with an
opener in :func:`open_test_store`; a backend whose service is unavailable FAILS under
``CI=true`` (CI must not go green by skipping) and is skipped otherwise. A test of a port that
not every backend implements says so with ``@pytest.mark.requires_port("graph", …)``; it is
skipped, with the reason, on a store whose ``capabilities`` lack one of them (MySQL/MariaDB
implements the ports of the category hierarchy).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from store_testkit import (
    DIM,
    STORE_BACKENDS,
    fresh_mysql_database,
    fresh_pg_database,
    start_pgserver,
)

from memory_core.scope import Scope
from memory_core.storage import open_store
from memory_core.storage.ports import Store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """The admin URL of one PostgreSQL + pgvector server for the whole session."""
    return start_pgserver()


async def open_test_store(backend: str, tmp_path: Path, pg_admin_url: str | None = None) -> Store:
    if backend == "sqlite":
        store = await open_store(f"sqlite:///{tmp_path / 'contract.db'}")
    elif backend == "postgres" and pg_admin_url is not None:
        store = await open_store(fresh_pg_database(pg_admin_url))
    elif backend == "mysql":
        store = await open_store(fresh_mysql_database())
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
    admin = request.getfixturevalue("pg_admin_url") if backend == "postgres" else None
    return lambda folder: open_test_store(backend, folder, admin)


@pytest.fixture(params=STORE_BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    admin = request.getfixturevalue("pg_admin_url") if request.param == "postgres" else None
    opened = await open_test_store(request.param, tmp_path, admin)
    marker = request.node.get_closest_marker("requires_port")
    missing = [p for p in (marker.args if marker else ()) if p not in opened.capabilities]
    if missing:
        await opened.close()
        pytest.skip(f"the {request.param} store does not implement the {', '.join(missing)} port")
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
