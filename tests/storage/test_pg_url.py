"""PostgreSQL URLs: libpq's socket-folder form and what opening one builds."""

from __future__ import annotations

import pytest
from store_testkit import fresh_pg_database, start_pgserver

from memory_core.errors import SchemaError
from memory_core.storage import create_store, diagnose_url, open_store, parse_database_url


def test_a_socket_folder_in_the_query_is_the_host() -> None:
    url = parse_database_url("postgresql://postgres:@/memoir?host=/tmp/pg/data")
    assert (url.host, url.database, url.user) == ("/tmp/pg/data", "memoir", "postgres")
    tcp = parse_database_url("postgresql://bob@db.internal:5433/memoir?host=/ignored")
    assert (tcp.host, tcp.port) == ("db.internal", 5433)  # a host in the netloc wins


def test_a_postgresql_url_builds_the_full_store_without_connecting() -> None:
    store = create_store("postgresql://bob:s3cret@127.0.0.1:1/memoir")
    assert store.backend == "postgresql" and "categories" in store.capabilities
    assert "s3cret" not in store.url.redacted()


@pytest.mark.postgres
@pytest.mark.anyio
async def test_doctor_never_creates_a_store_in_an_empty_database() -> None:
    url = fresh_pg_database(start_pgserver())
    with pytest.raises(SchemaError, match="no memoir store"):
        await open_store(url, create=False)
    findings = await diagnose_url(url, configured_embedder=None)
    assert [f.status for f in findings] == ["error"] and "no memoir store" in findings[0].message
    store = await open_store(url)  # an ordinary open creates it
    await store.close()
    reopened = await open_store(url, create=False)
    await reopened.close()
