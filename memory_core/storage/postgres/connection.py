"""One psycopg 3 async connection that reconnects after a drop, with helpful errors.

Every operation is an ``async fn(conn)`` run under a lock (one statement stream per
connection), inside a transaction when it writes. When the server drops the connection (a
restart, ``pg_terminate_backend``, a network blip) the operation is retried on a fresh connection
with exponential backoff; a transaction that was cut off was rolled back by the server, so
running it again is safe (the writes are idempotent on their natural keys anyway).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import anyio
import psycopg
import structlog

from memory_core.errors import (
    DatabaseUnavailableError,
    InvalidInputError,
    MemoirError,
    StorageError,
)
from memory_core.storage.url import DatabaseURL

__all__ = ["PostgresConnection", "backoff_delay", "connection_help"]

T = TypeVar("T")
log = structlog.get_logger(__name__)

_CONNECT_TIMEOUT_S = 10
_BACKOFF_BASE_S = 0.05
_BACKOFF_CAP_S = 2.0


def backoff_delay(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based): 50 ms doubling, jittered."""
    delay = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * (2**attempt))
    return delay * (0.5 + random.random() / 2)


def connection_help(url: DatabaseURL, cause: BaseException | str) -> DatabaseUnavailableError:
    """A connection failure as an error naming the redacted URL, the cause and what to check."""
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    lowered = str(cause).lower()
    host = f"{url.host}:{url.port or 5432}"
    user = url.user or "the current OS user"
    checks: list[str] = []
    missing_db = "does not exist" in lowered and "database" in lowered
    refused_user = not missing_db and any(
        word in lowered for word in ("role", "password", "authentication")
    )
    if missing_db:
        checks.append(
            f"create the database: `createdb -h {url.host} -p {url.port or 5432} "
            f"-U {url.user or 'postgres'} {url.database}`"
        )
    elif refused_user:
        checks.append(
            f"check that the role {user!r} exists and may log in to {url.database!r} "
            "(password in the URL, pg_hba.conf)"
        )
    else:
        checks.append(
            f"is PostgreSQL running and listening on {host}? (`pg_isready -h {url.host} "
            f"-p {url.port or 5432}`)"
        )
    # The generic checks, minus the one the cause already answered.
    if not missing_db:
        checks.append(f"does the database {url.database!r} exist?")
    if not refused_user:
        checks.append(f"does the user {user!r} have access to it?")
    return DatabaseUnavailableError(
        f"cannot connect to PostgreSQL at {url.redacted()}: {text}",
        hint="; ".join(checks),
        details={"url": url.redacted(), "backend": "postgresql"},
    )


def _connect_kwargs(url: DatabaseURL) -> dict[str, Any]:
    """libpq parameters from the URL; query options (``?sslmode=require``) pass through."""
    kwargs: dict[str, Any] = dict(parse_qsl(urlsplit(url.raw).query))
    kwargs.update(
        host=url.host or "127.0.0.1",
        port=url.port or 5432,
        dbname=url.database,
        connect_timeout=kwargs.get("connect_timeout", _CONNECT_TIMEOUT_S),
    )
    if url.user:
        kwargs["user"] = url.user
    if url.password is not None:
        kwargs["password"] = url.password
    return kwargs


class PostgresConnection:
    """A lazily (re)connected ``psycopg.AsyncConnection`` shared by one store."""

    def __init__(self, url: DatabaseURL, *, retries: int = 3) -> None:
        if url.backend != "postgresql":
            raise InvalidInputError(
                f"{url.redacted()} is not a PostgreSQL URL",
                hint="use postgresql://user@host:5432/dbname",
            )
        self.url = url
        self.retries = max(0, retries)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = anyio.Lock()
        self.reconnects = 0  # how many times a dropped connection was replaced

    async def connect(self) -> None:
        """Open the connection now (``open()`` calls this so a bad URL fails early).

        Raises:
            DatabaseUnavailableError: the server cannot be reached or refuses us.
        """
        async with self._lock:
            await self._ensure()

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None

    async def backend_pid(self) -> int:
        """The server process id of this connection (what ``pg_terminate_backend`` takes)."""

        async def pid(conn: psycopg.AsyncConnection[Any]) -> int:
            return int(conn.info.backend_pid)

        return await self.run(pid)

    async def _ensure(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        try:
            self._conn = await psycopg.AsyncConnection.connect(
                autocommit=True, **_connect_kwargs(self.url)
            )
        except psycopg.Error as exc:
            raise connection_help(self.url, exc) from exc
        except OSError as exc:
            raise connection_help(self.url, exc) from exc
        return self._conn

    def _is_drop(self, exc: BaseException) -> bool:
        """A lost connection (worth a reconnect), not a statement the server rejected."""
        if isinstance(exc, psycopg.errors.AdminShutdown | psycopg.errors.CrashShutdown):
            return True
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            conn = self._conn
            return conn is None or conn.closed or conn.broken
        return False

    async def run(
        self,
        fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
        *,
        write: bool = False,
    ) -> T:
        """Run ``fn(conn)`` (in one transaction when ``write``), reconnecting after a drop.

        Raises:
            DatabaseUnavailableError: the connection stayed down after ``retries`` attempts.
            MemoirError: whatever ``fn`` raises on purpose (passed through unchanged).
            StorageError: the server rejected a statement.
        """
        attempt = 0
        while True:
            try:
                async with self._lock:
                    conn = await self._ensure()
                    if write:
                        async with conn.transaction():
                            return await fn(conn)
                    return await fn(conn)
            except MemoirError as exc:
                if not isinstance(exc, DatabaseUnavailableError) or attempt >= self.retries:
                    raise
                cause: BaseException = exc
            except psycopg.Error as exc:
                # A deadlock or serialization failure rolled the transaction back; running it
                # again is the documented remedy, on the same connection.
                transient = isinstance(
                    exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure
                )
                if transient and attempt < self.retries:
                    delay = backoff_delay(attempt)
                    attempt += 1
                    log.warning("postgres transaction retried", cause=type(exc).__name__)
                    await anyio.sleep(delay)
                    continue
                if not self._is_drop(exc):
                    raise _statement_error(self.url, exc) from exc
                if attempt >= self.retries:
                    raise connection_help(self.url, exc) from exc
                cause = exc
            delay = backoff_delay(attempt)
            attempt += 1
            self.reconnects += 1
            log.warning(
                "postgres connection lost; reconnecting",
                url=self.url.redacted(),
                attempt=attempt,
                retries=self.retries,
                delay_s=round(delay, 3),
                cause=type(cause).__name__,
            )
            await anyio.sleep(delay)


def _statement_error(url: DatabaseURL, exc: psycopg.Error) -> MemoirError:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.DataError | psycopg.errors.CharacterNotInRepertoire):
        return InvalidInputError(
            f"PostgreSQL rejected a value: {first_line}",
            hint="check the text for NUL characters or over-long values",
        )
    return StorageError(
        f"PostgreSQL error on {url.redacted()}: {first_line}",
        hint="check the server log; run `memoir doctor --db <url>` for the connection checks",
    )
