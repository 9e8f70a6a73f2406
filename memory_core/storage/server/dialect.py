"""What differs between the server backends' SQL, in one small value per backend.

A repository of :mod:`memory_core.storage.server` writes its statements once and asks its
:class:`Dialect` for the pieces PostgreSQL and MySQL/MariaDB spell differently. Connections are
anything with psycopg's ``execute(sql, params) -> cursor`` (PyMySQL is wrapped to match, see
:mod:`memory_core.storage.mysql.database`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["MYSQL", "POSTGRES", "Cursor", "Dialect", "SqlConn"]


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class SqlConn(Protocol):
    """One connection inside a transaction (psycopg's ``Connection`` has this shape)."""

    def execute(self, query: Any, params: Any = ...) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """The spelling of one server backend."""

    name: Literal["postgresql", "mysql"]

    @property
    def is_pg(self) -> bool:
        return self.name == "postgresql"

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values`` (an empty list matches nothing)."""
        if not values:
            return "1 = 0", []
        if self.is_pg:
            return f"{column} = ANY(%s)", [list(values)]
        return f"{column} IN %s", [tuple(values)]

    def insert_ignore(self, head: str, key: str) -> tuple[str, str]:
        """``INSERT INTO table (…)`` that skips a row colliding with a unique key: the
        statement's start and end (``ON CONFLICT DO NOTHING`` / a no-op ``ON DUPLICATE KEY
        UPDATE key = key``, ``key`` being any column of the table).

        Not MySQL's ``INSERT IGNORE``: that also turns a foreign-key failure (a parent deleted
        by a concurrent commit), a CHECK failure or an over-long value into a warning, so the
        row silently does not exist or is stored truncated."""
        if self.is_pg:
            return f"INSERT INTO {head}", " ON CONFLICT DO NOTHING"
        return f"INSERT INTO {head}", f" ON DUPLICATE KEY UPDATE {key} = {key}"

    def quote(self, name: str) -> str:
        """``name`` as a quoted identifier (for a column named like a keyword, as ``key``)."""
        return f'"{name}"' if self.is_pg else f"`{name}`"

    def on_duplicate(self, key: str, assignments: str) -> str:
        """The end of an INSERT that runs ``assignments`` on the row whose unique ``key``
        the new row collides with (``ON CONFLICT … DO UPDATE`` / ``ON DUPLICATE KEY UPDATE``)."""
        if self.is_pg:
            return f" ON CONFLICT ({key}) DO UPDATE SET {assignments}"
        return f" ON DUPLICATE KEY UPDATE {assignments}"

    def inserted(self, column: str) -> str:
        """In :meth:`on_duplicate`'s assignments: the value the INSERT brought for ``column``."""
        return f"excluded.{column}" if self.is_pg else f"VALUES({column})"

    def text_plus_one(self, column: str) -> str:
        """A text column holding a whole number, plus one (the text of the sum on PostgreSQL;
        MySQL converts it back on assignment)."""
        if self.is_pg:
            return f"({column}::bigint + 1)::text"
        return f"CAST({column} AS UNSIGNED) + 1"

    def json_value(self, column: str, key: str) -> str:
        """The JSON value at top-level ``key`` of a JSON text column (comparable to
        :meth:`json_param`)."""
        if self.is_pg:
            return f"({column}::jsonb -> '{key}')"
        return f"JSON_EXTRACT({column}, '$.{key}')"

    def json_text(self, column: str, key: str) -> str:
        """The value at ``key`` as text (a string unquoted)."""
        if self.is_pg:
            return f"({column}::jsonb ->> '{key}')"
        return f"JSON_UNQUOTE(JSON_EXTRACT({column}, '$.{key}'))"

    def json_compare(self, column: str, key: str, value: Any) -> tuple[str, str, Any]:
        """How to compare the value at ``key`` with ``value`` as JSON (numbers as numbers):
        (left side, placeholder, parameter). MariaDB compares JSON strings from JSON_EXTRACT
        unequal to anything, so MySQL compares strings unquoted and other values as text."""
        if self.is_pg:
            return self.json_value(column, key), "%s::jsonb", json.dumps(value)
        if isinstance(value, str):
            return self.json_text(column, key), "%s", value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self.json_value(column, key), "%s", value
        return f"CAST({self.json_value(column, key)} AS CHAR)", "%s", json.dumps(value)

    def array_exists(self, column: str, cond: str) -> str:
        """Some element of the JSON array of strings in ``column`` satisfies ``tag.value cond``."""
        if self.is_pg:
            source = f"jsonb_array_elements_text({column}::jsonb) AS tag(value)"
        else:
            source = f"JSON_TABLE({column}, '$[*]' COLUMNS (value LONGTEXT PATH '$')) AS tag"
        return f"EXISTS (SELECT 1 FROM {source} WHERE tag.value {cond})"

    @property
    def regex(self) -> str:
        """The case-sensitive regular-expression match operator."""
        return "~" if self.is_pg else "REGEXP"

    @property
    def like(self) -> str:
        """Case-sensitive LIKE with no escape character (the columns' collation is binary)."""
        return "LIKE %s ESCAPE ''" if self.is_pg else "LIKE BINARY %s"

    def text(self, column: str) -> str:
        return f"{column}::text" if self.is_pg else f"CAST({column} AS CHAR)"

    def distinct(self, left: str, right: str) -> str:
        """``left`` differs from ``right``, a NULL counting as a value."""
        if self.is_pg:
            return f"{left} IS DISTINCT FROM {right}"
        return f"NOT ({left} <=> {right})"

    def nulls(self, descending: bool) -> str:
        """NULL sorts smallest (as SQLite); MySQL already does."""
        if not self.is_pg:
            return ""
        return " NULLS LAST" if descending else " NULLS FIRST"

    def executemany(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with contextlib.closing(conn.cursor()) as cur:
                cur.executemany(sql, list(rows))

    def is_unique_violation(self, exc: BaseException) -> bool:
        if self.is_pg:
            import psycopg

            return isinstance(exc, psycopg.errors.UniqueViolation)
        args: tuple[Any, ...] = getattr(exc, "args", ())
        return bool(args) and args[0] == 1062  # ER_DUP_ENTRY

    def savepoint(self, conn: Any) -> contextlib.AbstractContextManager[Any]:
        """Around one statement that may fail while the transaction must survive: a
        savepoint on PostgreSQL (a failed statement aborts the whole transaction there);
        InnoDB rolls back just the failed statement."""
        return conn.transaction() if self.is_pg else contextlib.nullcontext()


POSTGRES = Dialect("postgresql")
MYSQL = Dialect("mysql")
