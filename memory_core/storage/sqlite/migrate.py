"""Named, recorded, idempotent schema migrations.

Migrations are the ``NNNN_name.sql`` files beside this module. Each runs once, inside one write
transaction together with the row that records it, so a crash mid-migration leaves the schema as
it was. A database whose newest recorded migration is unknown here was written by a newer memoir:
we refuse to touch it rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from memory_core.errors import SchemaError

__all__ = ["Migration", "applied_versions", "apply_pending", "available_migrations", "split_sql"]

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """Every migration shipped with this code, in version order."""
    found: list[Migration] = []
    folder = resources.files("memory_core.storage.sqlite.migrations")
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise SchemaError(f"two migrations share a version number: {versions}")
    return found


def split_sql(script: str, complete_statement: Any) -> list[str]:
    """Split a script into statements with SQLite's own ``complete_statement``.

    ``executescript`` would COMMIT our surrounding transaction, so statements run one by one.
    """
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if complete_statement(buffer):
            statement = buffer.strip()
            if statement and statement != ";":
                statements.append(statement)
            buffer = ""
    if buffer.strip() and not all(
        part.strip().startswith("--") or not part.strip() for part in buffer.splitlines()
    ):
        raise SchemaError(f"migration has an unterminated statement: {buffer.strip()[:80]!r}")
    return statements


def applied_versions(conn: Any) -> set[int]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migration ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    return {row[0] for row in conn.execute("SELECT version FROM schema_migration")}


def apply_pending(conn: Any, complete_statement: Any) -> list[str]:
    """Apply every pending migration on ``conn`` (already inside a write transaction).

    Returns:
        The names of the migrations applied now (empty when the schema was current).

    Raises:
        SchemaError: the database is newer than this code, or a migration failed.
    """
    known = available_migrations()
    done = applied_versions(conn)
    newest_known = max((m.version for m in known), default=0)
    if done and max(done) > newest_known:
        raise SchemaError(
            f"the database has schema version {max(done)}, newer than this memoir knows "
            f"({newest_known})",
            hint="upgrade memoir (`pip install -U memoir-mcp`) or open a different database",
        )
    applied: list[str] = []
    for migration in known:
        if migration.version in done:
            continue
        for statement in split_sql(migration.sql, complete_statement):
            try:
                conn.execute(statement)
            except Exception as exc:
                raise SchemaError(
                    f"migration {migration.version:04d}_{migration.name} failed: {exc}",
                    hint="the database was left unchanged; report this with `memoir doctor --json`",
                ) from exc
        conn.execute(
            "INSERT INTO schema_migration(version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, datetime.now(UTC).isoformat()),
        )
        applied.append(f"{migration.version:04d}_{migration.name}")
    return applied
