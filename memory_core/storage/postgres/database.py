"""Synchronous psycopg 3 connections for the PostgreSQL store, used from worker threads: the
shared server pool (:mod:`memory_core.storage.server.pool`) with psycopg's transactions and
errors, the pgvector type adapters and the numbered migrations.
"""

from __future__ import annotations

import struct
import weakref
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import numpy as np
import psycopg
import structlog
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from memory_core.errors import MemoirError, SchemaError
from memory_core.storage.postgres.connection import connection_help, statement_error
from memory_core.storage.server.pool import ServerPool
from memory_core.storage.url import DatabaseURL

__all__ = ["PgDatabase", "PgVector", "available_migrations", "conninfo", "register_vector"]

log = structlog.get_logger(__name__)

_SCHEMA_LOCK_KEY = 0x6D656D6F6972_02  # "memoir" + store schema


class PgVector:
    """A float32 vector sent to a pgvector ``vector`` column (binary format)."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.asarray(array, dtype=np.float32).reshape(-1)


class _VectorDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        array: np.ndarray = obj.array
        return struct.pack(">HH", array.shape[0], 0) + array.astype(">f4").tobytes()


class _VectorBinaryLoader(Loader):
    format = Format.BINARY

    def load(self, data: Any) -> np.ndarray:
        raw = bytes(data)
        dim = struct.unpack_from(">H", raw)[0]
        return np.frombuffer(raw, dtype=">f4", count=dim, offset=4).astype(np.float32)


class _VectorTextLoader(Loader):
    def load(self, data: Any) -> np.ndarray:
        body = bytes(data)[1:-1]
        return np.array(body.split(b","), dtype=np.float32) if body else np.zeros(0, np.float32)


def register_vector(conn: psycopg.Connection[Any]) -> bool:
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        return False
    dumper = type("VectorDumper", (_VectorDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(PgVector, dumper)
    conn.adapters.register_loader(info.oid, _VectorBinaryLoader)
    conn.adapters.register_loader(info.oid, _VectorTextLoader)
    return True


def available_migrations() -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` of every shipped migration, in version order."""
    found: list[tuple[int, str, str]] = []
    folder = resources.files("memory_core.storage.postgres.migrations")
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name[5:-4], entry.read_text(encoding="utf-8")))
    found.sort()
    return found


def _migrate(conn: psycopg.Connection[Any]) -> list[str]:
    """Apply pending migrations in one transaction, under an advisory lock (two processes
    opening a fresh database at once must not both create the tables)."""
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migration (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        done = {int(r[0]) for r in conn.execute("SELECT version FROM schema_migration")}
        known = available_migrations()
        newest = max((v for v, _, _ in known), default=0)
        if done and max(done) > newest:
            raise SchemaError(
                f"the database has schema version {max(done)}, newer than this memoir knows "
                f"({newest})",
                hint="upgrade memoir to open this store",
            )
        for version, name, sql in known:
            if version in done:
                continue
            conn.execute(sql.encode())  # no parameters: a multi-statement script
            conn.execute(
                "INSERT INTO schema_migration (version, name, applied_at) VALUES (%s, %s, %s)",
                (version, name, datetime.now(UTC).isoformat()),
            )
            applied.append(f"{version:04d}_{name}")
    return applied


def conninfo(url: DatabaseURL) -> str:
    """The libpq connection string of ``url`` (``postgresql+psycopg://`` spelled plainly)."""
    scheme, rest = url.raw.split("://", 1)
    return "postgresql://" + rest if scheme.lower() != "postgresql" else url.raw


class PgDatabase(ServerPool["psycopg.Connection[Any]"]):
    """A pool of blocking connections to one PostgreSQL database holding a memoir store."""

    def __init__(self, url: DatabaseURL, *, pool_size: int = 4) -> None:
        super().__init__(url, pool_size=pool_size)
        self._typed: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()

    @property
    def conninfo(self) -> str:
        return conninfo(self.url)

    # -- the pool's hooks ------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            # The URL's parsed fields win over its text (a caller may have replaced them).
            fields = {
                "host": self.url.host,
                "port": self.url.port,
                "user": self.url.user,
                "password": self.url.password,
                "dbname": self.url.database,
            }
            overrides: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
            return psycopg.connect(self.conninfo, connect_timeout=10, autocommit=True, **overrides)
        except (psycopg.Error, OSError) as exc:
            raise connection_help(self.url, exc) from exc

    def _usable(self, conn: psycopg.Connection[Any]) -> bool:
        return not conn.closed and not conn.broken

    def _close(self, conn: psycopg.Connection[Any]) -> None:
        conn.close()

    def _prepare(self, conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        if conn not in self._typed and register_vector(conn):
            self._typed.add(conn)
        return conn

    def _begin(self, conn: psycopg.Connection[Any], *, write: bool, snapshot: bool) -> None:
        # One statement opens the transaction (a read: one snapshot, read-only).
        conn.execute(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if not write and snapshot else "BEGIN"
        )

    def _end(self, conn: psycopg.Connection[Any], *, commit: bool) -> None:
        conn.execute("COMMIT" if commit else "ROLLBACK")

    def _driver_error(self) -> type[BaseException]:
        return psycopg.Error

    def _transient(self, exc: BaseException) -> bool:
        # A foreign-key violation is a lost race here: a row this transaction links to was
        # deleted by another that committed first (a re-clustering removed a leaf while an
        # ingest filed into it), or the reverse. Run again, each sees the other's commit: the
        # ingest finds its category missing and files again; the re-clustering keeps the leaf.
        return isinstance(
            exc,
            psycopg.errors.DeadlockDetected
            | psycopg.errors.SerializationFailure
            | psycopg.errors.UniqueViolation
            | psycopg.errors.ForeignKeyViolation,
        )

    def _unavailable(self, exc: BaseException) -> MemoirError:
        return connection_help(self.url, exc)

    def _statement_error(self, exc: BaseException) -> MemoirError:
        assert isinstance(exc, psycopg.Error)
        return statement_error(self.url, exc)

    def migrate(self, *, create: bool = True) -> list[str]:
        """Create or migrate the schema; with ``create=False`` a database without a memoir
        store is an error (``memoir doctor`` must not create one)."""
        conn = self._take()
        try:
            if not create:
                found = conn.execute("SELECT to_regclass('schema_migration')").fetchone()
                if found is None or found[0] is None:
                    raise SchemaError(
                        f"there is no memoir store in {self.url.redacted()}",
                        hint="open it once with any memoir command (e.g. `memoir --db <url> "
                        "stats`), which creates the tables",
                    )
            try:
                applied = _migrate(conn)
            except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile) as exc:
                raise SchemaError(
                    f"PostgreSQL at {self.url.redacted()} has no pgvector extension: "
                    f"{str(exc).strip().splitlines()[0]}",
                    hint="install pgvector on the server (e.g. the postgresql-<version>-pgvector "
                    "package) and let the URL's user run CREATE EXTENSION vector, or use a "
                    "sqlite:///path/to/memoir.db URL",
                    details={"url": self.url.redacted(), "backend": "postgresql"},
                ) from exc
            except psycopg.Error as exc:
                if conn.closed or conn.broken:
                    raise connection_help(self.url, exc) from exc
                raise statement_error(self.url, exc) from exc
            if applied:
                log.info("postgres store migrated", url=self.url.redacted(), applied=applied)
            return applied
        finally:
            self._idle.put(conn)
