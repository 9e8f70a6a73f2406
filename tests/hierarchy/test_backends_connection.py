"""PostgreSQL and MySQL/MariaDB only: first-use schema creation, connection errors that say what
to check, and reconnect-with-backoff after the server drops the connection.

The drops are real: a second connection kills ours (``pg_terminate_backend`` / ``KILL``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import anyio
import pytest

from memory_core.errors import DatabaseUnavailableError, InvalidInputError, SchemaError
from memory_core.hierarchy.store import NewChunk
from memory_core.models import content_hash, stable_id
from memory_core.scope import Scope
from memory_core.storage.url import DatabaseURL, parse_database_url

try:
    from conftest_backends import (
        SERVER_BACKENDS,
        admin_connection,
        anyio_backend,
        backend_url,
        create_database,
        drop_database,
        require_service,
        server_store,
        service_url,
        unique_scope,
        with_database,
    )
except ImportError:  # pragma: no cover - tests/hierarchy became a package
    from hierarchy.conftest_backends import (  # type: ignore[no-redef]
        SERVER_BACKENDS,
        admin_connection,
        anyio_backend,
        backend_url,
        create_database,
        drop_database,
        require_service,
        server_store,
        service_url,
        unique_scope,
        with_database,
    )

__all__ = ["anyio_backend"]

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("backend", SERVER_BACKENDS)]


def _store(backend: str, url: DatabaseURL, *, depth: int = 3, retries: int = 3) -> Any:
    return server_store(url, depth=depth, retries=retries)


def _admin(backend: str, url: DatabaseURL) -> Any:
    return admin_connection(backend, url)


def _execute(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    cursor = conn.cursor()
    try:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []
    finally:
        cursor.close()


async def _kill(backend: str, store: Any) -> None:
    """Kill the store's server-side session from another connection."""
    url = parse_database_url(backend_url(backend))
    admin = _admin(backend, url)
    try:
        # Every connection of the store's pool (one, after a call at a time).
        for conn in list(store.connection._all):
            if backend == "postgres":
                pid = conn.info.backend_pid
                assert _execute(admin, "SELECT pg_terminate_backend(%s)", (pid,)) == [(True,)]
            else:
                _execute(admin, f"KILL {int(conn.thread_id())}")
    finally:
        admin.close()


@pytest.fixture
def fresh_database(backend: str) -> Iterator[DatabaseURL]:
    """A brand-new empty database on the service, dropped afterwards."""
    require_service(backend)
    base = parse_database_url(service_url(backend))
    name = f"memoir_t_{uuid.uuid4().hex[:12]}"
    url = create_database(backend, base, name)
    try:
        yield url
    finally:
        drop_database(backend, base, name)


def _tables_and_indexes(backend: str, url: DatabaseURL) -> tuple[set[str], set[str]]:
    admin = _admin(backend, url)
    try:
        if backend == "postgres":
            tables = _execute(
                admin, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
            indexes = _execute(
                admin, "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
            )
        else:
            tables = _execute(
                admin,
                "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()",
            )
            indexes = _execute(
                admin,
                "SELECT DISTINCT index_name FROM information_schema.statistics "
                "WHERE table_schema = DATABASE()",
            )
    finally:
        admin.close()
    return {str(t[0]) for t in tables}, {str(i[0]) for i in indexes}


# -- first use ---------------------------------------------------------------------------


async def test_first_open_creates_the_tables_and_indexes(
    backend: str, fresh_database: DatabaseURL
) -> None:
    assert _tables_and_indexes(backend, fresh_database)[0] == set()
    # Two processes opening a fresh database at the same moment must both succeed.
    stores = [_store(backend, fresh_database) for _ in range(2)]
    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(store.open)
    try:
        tables, indexes = _tables_and_indexes(backend, fresh_database)
        assert {"schema_migration", "category", "item", "run"} <= tables
        # Requirement 3: indexes on parent_id and on the chunks' category_id.
        assert {
            "category_scope_parent_name",
            "category_parent",
            "item_category_created_uid",
        } <= indexes
        scope = unique_scope()
        made = await stores[0].create_category(scope, parent_id=None, level=1, name="First")
        assert (await stores[1].all_categories(scope))[0].category_id == made.category_id
    finally:
        for store in stores:
            await store.close()


async def test_tables_from_a_newer_memoir_are_refused(
    backend: str, fresh_database: DatabaseURL
) -> None:
    store = _store(backend, fresh_database)
    await store.open()
    await store.close()
    admin = _admin(backend, fresh_database)
    try:
        _execute(
            admin,
            "INSERT INTO schema_migration (version, name, applied_at) VALUES (%s, %s, %s)",
            (99, "future", "2099-01-01T00:00:00+00:00"),
        )
    finally:
        admin.close()
    with pytest.raises(SchemaError, match="99") as caught:
        await _store(backend, fresh_database).open()
    assert caught.value.hint and "upgrade" in caught.value.hint


# -- connection errors -------------------------------------------------------------------


async def test_an_unreachable_server_names_the_redacted_url_and_what_to_check(
    backend: str,
) -> None:
    scheme = "postgresql" if backend == "postgres" else "mysql"
    url = parse_database_url(f"{scheme}://memoir:s3cret-pw@127.0.0.1:1/test")
    with pytest.raises(DatabaseUnavailableError) as caught:
        await _store(backend, url).open()
    error = caught.value
    assert "s3cret-pw" not in str(error) and "s3cret-pw" not in repr(error.to_dict())
    assert "***" in error.message and "127.0.0.1:1" in error.message
    assert error.hint is not None
    assert "running" in error.hint and "127.0.0.1:1" in error.hint
    assert "'test'" in error.hint and "'memoir'" in error.hint  # database and user to check


async def test_a_missing_database_says_how_to_create_it(backend: str) -> None:
    require_service(backend)
    base = parse_database_url(backend_url(backend))
    url = with_database(base, "no_such_db_xyz")
    with pytest.raises(DatabaseUnavailableError) as caught:
        await _store(backend, url).open()
    assert "no_such_db_xyz" in caught.value.message
    assert caught.value.hint and "create" in caught.value.hint.lower()
    assert "no_such_db_xyz" in caught.value.hint


async def test_an_unknown_user_says_to_check_the_user(backend: str) -> None:
    require_service(backend)
    base = parse_database_url(backend_url(backend))
    url = replace(base, user="memoir_nosuchuser")
    with pytest.raises(DatabaseUnavailableError) as caught:
        await _store(backend, url).open()
    assert caught.value.hint and "memoir_nosuchuser" in caught.value.hint


# -- dropped connections ---------------------------------------------------------------------


async def test_a_killed_connection_is_replaced_and_the_next_call_succeeds(backend: str) -> None:
    require_service(backend)
    store = _store(backend, parse_database_url(backend_url(backend)), depth=1)
    await store.open()
    scope = unique_scope("kill")
    try:
        leaf = await store.create_category(scope, parent_id=None, level=1, name="Before")
        await _kill(backend, store)
        # A write right after the drop: reconnect, run the transaction once, no error.
        text = "written after the server dropped us"
        chunk = NewChunk(stable_id(scope, 1), text, 6, content_hash(text), "2025-01-01T00:00:00")
        [chunk_id] = await store.add_chunks(scope, leaf.category_id, [chunk])
        assert store.connection.reconnects == 1
        assert [c.chunk_id for c in await store.chunks_in_category(scope, leaf.category_id)] == [
            chunk_id
        ]
        await _kill(backend, store)
        assert await store.count_categories(scope) == 1  # a read recovers the same way
        assert store.connection.reconnects == 2
    finally:
        await store.close()


async def test_without_retries_a_dropped_connection_is_a_clear_error(backend: str) -> None:
    require_service(backend)
    store = _store(backend, parse_database_url(backend_url(backend)), retries=0)
    await store.open()
    try:
        await _kill(backend, store)
        with pytest.raises(DatabaseUnavailableError) as caught:
            await store.count_categories(unique_scope())
        assert caught.value.hint and "running" in caught.value.hint
        # The store is still usable once the server is back: the next call reconnects.
        assert await store.count_categories(unique_scope()) == 0
    finally:
        await store.close()


# -- values the server cannot hold -------------------------------------------------------


async def test_values_the_server_cannot_hold_are_input_errors(backend: str) -> None:
    require_service(backend)
    store = _store(backend, parse_database_url(backend_url(backend)))
    await store.open()
    try:
        if backend == "postgres":
            # PostgreSQL text cannot hold U+0000; the store says so instead of a driver error.
            with pytest.raises(InvalidInputError, match="NUL"):
                await store.create_category(unique_scope(), parent_id=None, level=1, name="a\x00b")
        else:
            # A key longer than the scope column (built directly: Scope.of refuses it sooner).
            too_long = Scope(key="s" * 600, fields=(("scope", "s" * 600),))
            with pytest.raises(InvalidInputError):
                await store.create_category(too_long, parent_id=None, level=1, name="Long scope")
    finally:
        await store.close()
