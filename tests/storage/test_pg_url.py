"""PostgreSQL URLs: libpq's socket-folder form and what opening one builds."""

from __future__ import annotations

from memory_core.storage import create_store, parse_database_url


def test_a_socket_folder_in_the_query_is_the_host() -> None:
    url = parse_database_url("postgresql://postgres:@/memoir?host=/tmp/pg/data")
    assert (url.host, url.database, url.user) == ("/tmp/pg/data", "memoir", "postgres")
    tcp = parse_database_url("postgresql://bob@db.internal:5433/memoir?host=/ignored")
    assert (tcp.host, tcp.port) == ("db.internal", 5433)  # a host in the netloc wins


def test_a_postgresql_url_builds_the_full_store_without_connecting() -> None:
    store = create_store("postgresql://bob:s3cret@127.0.0.1:1/memoir")
    assert store.backend == "postgresql" and "categories" in store.capabilities
    assert "s3cret" not in store.url.redacted()
