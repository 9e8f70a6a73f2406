"""Blocking PyMySQL connections for the MySQL / MariaDB store, used from worker threads: the
shared server pool (:mod:`memory_core.storage.server.pool`) with PyMySQL's transactions and
error codes, and the schema created on first use.

:class:`MyConn` gives a PyMySQL connection psycopg's shape (``execute`` returns a cursor), so
the shared repositories of :mod:`memory_core.storage.server` run on it unchanged.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pymysql
import structlog

from memory_core.errors import MemoirError, SchemaError
from memory_core.storage.mysql.connection import (
    RETRY_TXN,
    connection_help,
    error_code,
    statement_error,
)
from memory_core.storage.mysql.schema import SCHEMA_LOCK_NAME, SCHEMA_VERSION, schema_statements
from memory_core.storage.server.pool import ServerPool
from memory_core.storage.url import DatabaseURL

__all__ = ["MyConn", "MysqlDatabase"]

log = structlog.get_logger(__name__)

Raw = pymysql.connections.Connection  # type: ignore[type-arg]
_SCHEMA_LOCK_TIMEOUT_S = 30


class MyConn:
    """A PyMySQL connection with psycopg's ``execute(sql, params) -> cursor``."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, query: str, params: Any = None) -> Any:
        cursor = self.raw.cursor()
        cursor.execute(query, tuple(params) if params is not None else None)
        return cursor

    def cursor(self) -> Any:
        return self.raw.cursor()


class MysqlDatabase(ServerPool[Any]):
    """A pool of blocking connections to one MySQL / MariaDB database holding a memoir store."""

    def __init__(self, url: DatabaseURL, *, pool_size: int = 4) -> None:
        super().__init__(url, pool_size=pool_size)
        self.server_version = ""

    # -- the pool's hooks ------------------------------------------------------------------

    def _connect(self) -> Any:
        try:
            conn = pymysql.connect(
                host=self.url.host or "127.0.0.1",
                port=self.url.port or 3306,
                user=self.url.user or "root",
                password=self.url.password or "",
                database=self.url.database,
                charset="utf8mb4",
                autocommit=True,
                connect_timeout=10,
            )
        except (pymysql.err.Error, OSError) as exc:
            raise connection_help(self.url, exc) from exc
        with conn.cursor() as cursor:
            # READ COMMITTED: after INSERT IGNORE met a twin another writer just committed,
            # the SELECT that follows must see that row (REPEATABLE READ could hide it).
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cursor.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')")
            cursor.execute("SELECT VERSION()")
            self.server_version = str(cursor.fetchone()[0])
        return conn

    def _usable(self, conn: Any) -> bool:
        return bool(conn.open)

    def _close(self, conn: Any) -> None:
        conn.close()

    def _prepare(self, conn: Any) -> MyConn:
        return MyConn(conn)

    def _begin(self, conn: Any, *, write: bool, snapshot: bool) -> None:
        conn.begin()

    def _end(self, conn: Any, *, commit: bool) -> None:
        conn.commit() if commit else conn.rollback()

    def _driver_error(self) -> type[BaseException]:
        return pymysql.err.Error

    def _transient(self, exc: BaseException) -> bool:
        return error_code(exc) in RETRY_TXN

    def _unavailable(self, exc: BaseException) -> MemoirError:
        return connection_help(self.url, exc)

    def _statement_error(self, exc: BaseException) -> MemoirError:
        assert isinstance(exc, pymysql.err.Error)
        return statement_error(self.url, exc)

    @property
    def mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    def migrate(self, *, create: bool = True) -> list[str]:
        """Create the tables (idempotently, under a server lock: two processes opening a fresh
        database at once create them one by one); with ``create=False`` a database without a
        memoir store is an error."""

        def run(conn: MyConn) -> list[str]:
            found = conn.execute(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = 'schema_migration'"
            ).fetchone()
            if not create and not found[0]:
                raise SchemaError(
                    f"there is no memoir store in {self.url.redacted()}",
                    hint="open it once with any memoir command (e.g. `memoir --db <url> "
                    "stats`), which creates the tables",
                )
            if found[0]:
                done = {int(r[0]) for r in conn.execute("SELECT version FROM schema_migration")}
                if done and max(done) > SCHEMA_VERSION:
                    raise SchemaError(
                        f"the database has schema version {max(done)}, newer than this memoir "
                        f"knows ({SCHEMA_VERSION})",
                        hint="upgrade memoir to open this store",
                    )
                if SCHEMA_VERSION in done:
                    return []
            got = conn.execute(
                "SELECT GET_LOCK(%s, %s)", (SCHEMA_LOCK_NAME, _SCHEMA_LOCK_TIMEOUT_S)
            ).fetchone()
            if not got or got[0] != 1:
                raise SchemaError(
                    f"timed out waiting for another process creating the tables in "
                    f"{self.url.redacted()}",
                    hint="try again; check for a stuck memoir process",
                )
            try:
                for statement in schema_statements(mariadb=self.mariadb):
                    conn.execute(statement)  # DDL commits implicitly: idempotent statements
                conn.execute(
                    "INSERT IGNORE INTO schema_migration (version, name, applied_at) "
                    "VALUES (%s, %s, %s)",
                    (SCHEMA_VERSION, "store", datetime.now(UTC).isoformat()),
                )
            finally:
                conn.execute("SELECT RELEASE_LOCK(%s)", (SCHEMA_LOCK_NAME,))
            log.info("mysql store created", url=self.url.redacted())
            return [f"{SCHEMA_VERSION:04d}_store"]

        return self.run_sync(run, write=False)
