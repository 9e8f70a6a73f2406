"""Seed 004 §5.1: "the system does not generate an internal scope identifier; it uses the scope
columns directly". Read from the tables a SQLite file and a PostgreSQL schema hold after two
scopes were memorised: the scope fields are the only scope key, under any name."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from memory_core.pipeline.service import MemoryService
from tests.pipeline.layer_kit import ALICE, BOB, CATEGORIES, CHAT, OrgScope

SCOPE_FIELDS = ["org_id", "user_id"]
SCOPED_TABLES = {
    "layer_resource", "layer_item", "layer_category", "layer_category_sum", "layer_intention",
}  # fmt: skip


@contextmanager
def _tables(backend: str, location: str) -> Iterator[tuple[list[str], Any]]:
    """The layer's table names and a DB-API connection to read them."""
    if backend == "sqlite":
        import sqlite3

        with closing(sqlite3.connect(location)) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            yield sorted(r[0] for r in rows), conn
        return
    import psycopg

    with psycopg.connect(location) as pg:
        rows = pg.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
        yield sorted(r[0] for r in rows), pg


def _rows(conn: Any, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cursor = conn.cursor()
    cursor.execute(f"SELECT * FROM {table}")
    return [d[0] for d in cursor.description], cursor.fetchall()


def _keyed_by_scope(columns: list[str], rows: list[tuple[Any, ...]]) -> list[str]:
    """Columns other than the scope fields whose value is one per scope and differs between
    scopes: a scope identifier under another name."""
    at = [columns.index(f) for f in SCOPE_FIELDS]
    by_scope: dict[tuple[Any, ...], list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_scope[tuple(row[i] for i in at)].append(row)
    if len(by_scope) < 2 or all(len(group) < 2 for group in by_scope.values()):
        return []  # one scope, or one row a scope: nothing tells a scope key from data
    found = []
    for index, column in enumerate(columns):
        if column in SCOPE_FIELDS:
            continue
        per_scope = [{str(row[index]) for row in group} for group in by_scope.values()]
        one_each = all(len(values) == 1 for values in per_scope)
        if one_each and len(set().union(*per_scope)) == len(by_scope):
            found.append(column)
    return found


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_the_scope_fields_are_the_only_scope_key_in_every_layer_table(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        location = str(tmp_path / "layer.db")
        store: dict[str, str] = {"provider": "sqlite", "path": location}
    else:
        location = request.getfixturevalue("layer_pg_url")
        store = {"provider": "postgres", "url": location}
    service = MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": store},
        embedder="hash:64",
    )
    for scope in (ALICE, BOB):
        service.memorize(scope, conversation=CHAT)
        service.memorize(scope, content="We already finished the schema changes for billing.")
    service.close()

    with _tables(backend, location) as (tables, conn):
        assert set(tables) >= SCOPED_TABLES
        assert not [t for t in tables if "scope" in t]  # no scope table to point at
        for table in tables:
            columns, rows = _rows(conn, table)
            assert not [c for c in columns if "scope" in c.lower()], table
            if table in SCOPED_TABLES:
                assert columns[:2] == SCOPE_FIELDS, table
                assert {tuple(r[:2]) for r in rows} == {("acme", "alice"), ("acme", "bob")}
                assert _keyed_by_scope(columns, rows) == [], table
            else:  # the meta, revision, run and index tables hold no scope column at all
                assert not set(columns) & set(SCOPE_FIELDS), table
