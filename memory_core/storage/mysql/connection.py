"""One PyMySQL connection, used from a worker thread, that reconnects after a drop.

PyMySQL is synchronous: every operation is a plain ``fn(cursor)`` run with
``anyio.to_thread.run_sync`` while an async lock is held (one statement stream per connection),
inside ``BEGIN … COMMIT`` when it writes. When the server drops the connection (a restart,
``KILL <id>``, ``wait_timeout``) the operation is retried on a fresh connection with exponential
backoff; a transaction cut off by the drop was rolled back by the server, and the writes are
idempotent on their natural keys, so running it again is safe. Deadlocks are retried the same way.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import pymysql
import pymysql.cursors
import structlog

from memory_core.errors import (
    DatabaseUnavailableError,
    InvalidInputError,
    MemoirError,
    StorageError,
)
from memory_core.storage.url import DatabaseURL

__all__ = ["MysqlConnection", "backoff_delay", "connection_help"]

T = TypeVar("T")
log = structlog.get_logger(__name__)

_CONNECT_TIMEOUT_S = 10
_BACKOFF_BASE_S = 0.05
_BACKOFF_CAP_S = 2.0

# Server/client error codes that mean "the connection is gone" or "run the transaction again":
# 2006 server has gone away, 2013 lost connection during query, 2055 lost connection (system
# error), 1927 connection killed (MariaDB), 4031 disconnected for inactivity (MariaDB),
# 1053 server shutdown in progress, 1213 deadlock, 1205 lock wait timeout.
_DROPPED = frozenset({2006, 2013, 2055, 1927, 4031, 1053})
_RETRY_TXN = frozenset({1213, 1205})
_BAD_DATABASE = 1049
_ACCESS_DENIED = frozenset({1044, 1045, 1698})


def backoff_delay(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based): 50 ms doubling, jittered."""
    delay = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * (2**attempt))
    return delay * (0.5 + random.random() / 2)


def _code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def connection_help(url: DatabaseURL, cause: BaseException | str) -> DatabaseUnavailableError:
    """A connection failure as an error naming the redacted URL, the cause and what to check."""
    code = _code(cause) if isinstance(cause, BaseException) else None
    args: tuple[Any, ...] = tuple(getattr(cause, "args", ()))
    text = str(args[1]) if len(args) > 1 else str(cause) or type(cause).__name__
    host = f"{url.host}:{url.port or 3306}"
    user = url.user or "root"
    checks: list[str] = []
    missing_db = code == _BAD_DATABASE
    refused_user = code in _ACCESS_DENIED
    if missing_db:
        checks.append(
            f"create the database: `mysql -h {url.host} -P {url.port or 3306} -u {user} "
            f"-e 'CREATE DATABASE {url.database} CHARACTER SET utf8mb4'`"
        )
    elif refused_user:
        checks.append(
            f"check the user {user!r} and its password, and that it is granted access to "
            f"{url.database!r} from this host"
        )
    else:
        checks.append(
            f"is MySQL/MariaDB running and listening on {host}? "
            f"(`mysqladmin -h {url.host} -P {url.port or 3306} ping`)"
        )
    # The generic checks, minus the one the cause already answered.
    if not missing_db:
        checks.append(f"does the database {url.database!r} exist?")
    if not refused_user:
        checks.append(f"does the user {user!r} have access to it?")
    return DatabaseUnavailableError(
        f"cannot connect to MySQL at {url.redacted()}: {text}",
        hint="; ".join(checks),
        details={"url": url.redacted(), "backend": "mysql", "code": code},
    )


class MysqlConnection:
    """A lazily (re)connected PyMySQL connection shared by one store."""

    def __init__(self, url: DatabaseURL, *, retries: int = 3) -> None:
        if url.backend != "mysql":
            raise InvalidInputError(
                f"{url.redacted()} is not a MySQL URL", hint="use mysql://user@host:3306/dbname"
            )
        self.url = url
        self.retries = max(0, retries)
        self._conn: pymysql.connections.Connection[Any] | None = None
        self._lock = anyio.Lock()
        self.reconnects = 0  # how many times a dropped connection was replaced

    async def connect(self) -> None:
        """Open the connection now (``open()`` calls this so a bad URL fails early).

        Raises:
            DatabaseUnavailableError: the server cannot be reached or refuses us.
        """
        async with self._lock:
            await anyio.to_thread.run_sync(self._ensure)

    async def close(self) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._drop)

    async def thread_id(self) -> int:
        """The server's id of this connection (what ``KILL <id>`` takes)."""

        def read(cursor: Any) -> int:
            cursor.execute("SELECT CONNECTION_ID()")
            return int(cursor.fetchone()[0])

        return await self.run(read)

    def _drop(self) -> None:
        if self._conn is not None:
            # Already closed by the server: nothing left to release.
            with contextlib.suppress(pymysql.err.Error):
                self._conn.close()
            self._conn = None

    def _ensure(self) -> pymysql.connections.Connection[Any]:
        if self._conn is not None and self._conn.open:
            return self._conn
        self._drop()
        try:
            conn = pymysql.connect(
                host=self.url.host or "127.0.0.1",
                port=self.url.port or 3306,
                user=self.url.user or "root",
                password=self.url.password or "",
                database=self.url.database,
                charset="utf8mb4",
                autocommit=True,
                connect_timeout=_CONNECT_TIMEOUT_S,
            )
        except pymysql.err.Error as exc:
            raise connection_help(self.url, exc) from exc
        except OSError as exc:
            raise connection_help(self.url, exc) from exc
        with conn.cursor() as cursor:
            # READ COMMITTED: after INSERT IGNORE met a twin another writer just committed,
            # the SELECT that follows must see that row (REPEATABLE READ could hide it).
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cursor.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')")
        self._conn = conn
        return conn

    def _call(self, fn: Callable[[Any], T], write: bool) -> T:
        conn = self._ensure()
        with conn.cursor() as cursor:
            if not write:
                return fn(cursor)
            conn.begin()
            try:
                result = fn(cursor)
            except BaseException:
                if conn.open:
                    try:
                        conn.rollback()
                    except pymysql.err.Error:
                        self._drop()
                raise
            conn.commit()
            return result

    async def run(self, fn: Callable[[Any], T], *, write: bool = False) -> T:
        """Run ``fn(cursor)`` in a worker thread (in one transaction when ``write``),
        reconnecting after a drop.

        Raises:
            DatabaseUnavailableError: the connection stayed down after ``retries`` attempts.
            MemoirError: whatever ``fn`` raises on purpose (passed through unchanged).
            InvalidInputError: the server rejected a value (too long, bad encoding).
            StorageError: the server rejected a statement.
        """
        attempt = 0
        while True:
            try:
                async with self._lock:
                    return await anyio.to_thread.run_sync(self._call, fn, write)
            except MemoirError as exc:
                if not isinstance(exc, DatabaseUnavailableError) or attempt >= self.retries:
                    raise
                cause: BaseException = exc
            except pymysql.err.Error as exc:
                code = _code(exc)
                dropped = code in _DROPPED or isinstance(exc, pymysql.err.InterfaceError)
                if not dropped and code not in _RETRY_TXN:
                    raise _statement_error(self.url, exc) from exc
                if dropped:
                    async with self._lock:
                        await anyio.to_thread.run_sync(self._drop)
                if attempt >= self.retries:
                    if dropped:
                        raise connection_help(self.url, exc) from exc
                    raise _statement_error(self.url, exc) from exc
                cause = exc
            delay = backoff_delay(attempt)
            attempt += 1
            self.reconnects += 1
            log.warning(
                "mysql connection lost or transaction aborted; retrying",
                url=self.url.redacted(),
                attempt=attempt,
                retries=self.retries,
                delay_s=round(delay, 3),
                cause=type(cause).__name__,
                code=_code(cause),
            )
            await anyio.sleep(delay)


def _statement_error(url: DatabaseURL, exc: pymysql.err.Error) -> MemoirError:
    args = exc.args
    text = str(args[1]) if len(args) > 1 else str(exc)
    if isinstance(exc, pymysql.err.DataError):
        return InvalidInputError(
            f"MySQL rejected a value: {text}", hint="shorten the value or check its encoding"
        )
    return StorageError(
        f"MySQL error {_code(exc)} on {url.redacted()}: {text}",
        hint="check the server log; run `memoir doctor --db <url>` for the connection checks",
    )
