"""What PostgreSQL errors mean: a connection failure that says what to check, and a rejected
statement as an input or storage error."""

from __future__ import annotations

import psycopg

from memory_core.errors import (
    DatabaseUnavailableError,
    InvalidInputError,
    MemoirError,
    StorageError,
)
from memory_core.storage.url import DatabaseURL

__all__ = ["connection_help", "statement_error"]


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


def statement_error(url: DatabaseURL, exc: psycopg.Error) -> MemoirError:
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
