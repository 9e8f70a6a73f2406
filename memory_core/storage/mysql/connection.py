"""What MySQL / MariaDB errors mean: a connection failure that says what to check, a rejected
statement, and which error codes are a transaction to run again.
"""

from __future__ import annotations

from typing import Any

import pymysql

from memory_core.errors import (
    DatabaseUnavailableError,
    InvalidInputError,
    MemoirError,
    StorageError,
)
from memory_core.storage.url import DatabaseURL

__all__ = ["RETRY_TXN", "connection_help", "error_code", "statement_error"]

# Server error codes that mean "run the transaction again": 1213 deadlock, 1205 lock wait
# timeout, 1451 / 1452 a foreign key broken by a concurrent commit (a re-clustering removed a
# category while an ingest filed into it: run again, the ingest sees it missing and refiles).
# (A dropped connection shows as the connection no longer being open.)
RETRY_TXN = frozenset({1213, 1205, 1451, 1452})
_BAD_DATABASE = 1049
_ACCESS_DENIED = frozenset({1044, 1045, 1698})


def error_code(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def connection_help(url: DatabaseURL, cause: BaseException | str) -> DatabaseUnavailableError:
    """A connection failure as an error naming the redacted URL, the cause and what to check."""
    code = error_code(cause) if isinstance(cause, BaseException) else None
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


def statement_error(url: DatabaseURL, exc: pymysql.err.Error) -> MemoirError:
    args = exc.args
    text = str(args[1]) if len(args) > 1 else str(exc)
    if isinstance(exc, pymysql.err.DataError):
        return InvalidInputError(
            f"MySQL rejected a value: {text}", hint="shorten the value or check its encoding"
        )
    return StorageError(
        f"MySQL error {error_code(exc)} on {url.redacted()}: {text}",
        hint="check the server log; run `memoir doctor --db <url>` for the connection checks",
    )
