"""Recall Query Language statements: parse into a :class:`RqlQuery`.

::

    SELECT <fields> FROM chunk|doc
    [USING semantic(<text>) [, lexical(<text>)]]
    [FILTER <FEL expression>]
    [ORDER BY <field>|score [ASC|DESC]]
    [LIMIT <n> [OFFSET <m>]] [;]

Keywords are case-insensitive. ``SELECT`` fields may be unqualified; unknown ones are ignored
(v0.1), and collected in ``ignored_fields`` so the caller can warn. ``FILTER`` follows FEL's
strict rules. Errors carry line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from memory_core.documents.fel import FIELDS, Expr, FilterLimits, Parser, syntax_error
from memory_core.documents.lexer import tokenize
from memory_core.errors import QuerySyntaxError

__all__ = ["MAX_LIMIT", "MAX_OFFSET", "SELECTABLE", "RqlQuery", "parse_rql"]

MAX_LIMIT = 10_000
MAX_OFFSET = 1_000_000
SELECTABLE = (*FIELDS, "score", "doc.size")


@dataclass(frozen=True)
class RqlQuery:
    """A parsed RQL statement."""

    table: Literal["chunk", "doc"]
    fields: tuple[str, ...]
    semantic: str | None = None
    lexical: str | None = None
    filter: Expr | None = None
    order_by: str | None = None
    descending: bool = True
    limit: int | None = None
    offset: int = 0
    ignored_fields: tuple[str, ...] = field(default=())

    @property
    def uses_search(self) -> bool:
        return self.semantic is not None or self.lexical is not None


def _qualify(name: str, table: str) -> str | None:
    lowered = name.lower()
    if lowered in ("score", "*"):
        return lowered
    if "." in lowered:
        return lowered if lowered in SELECTABLE else None
    candidate = f"{table}.{lowered}"
    return candidate if candidate in SELECTABLE else None


def parse_rql(text: str, limits: FilterLimits | None = None) -> RqlQuery:
    """Parse one RQL statement.

    Raises:
        QuerySyntaxError: the statement does not follow the grammar, a FILTER field is
            unqualified or unknown, or LIMIT / OFFSET is out of range.
        LimitExceededError: the FILTER is nested deeper, or has more terms, than ``limits``.
    """
    parser = Parser(tokenize(text), limits)
    if parser.current.kind == "end":
        raise syntax_error(parser.current, "the query is empty", "SELECT")
    parser.expect_keyword("SELECT")
    raw_fields: list[str] = []
    while True:
        token = parser.current
        if token.kind == "ident" and token.value.upper() not in ("FROM",):
            raw_fields.append(token.value)
            parser.advance()
        elif parser.at_punct("*"):
            raw_fields.append("*")
            parser.advance()
        else:
            raise syntax_error(token, "expected a field to select", "a field name, score or *")
        if not parser.at_punct(","):
            break
        parser.advance()
    parser.expect_keyword("FROM")
    table_token = parser.current
    if table_token.kind != "ident" or table_token.value.lower() not in ("chunk", "doc"):
        raise syntax_error(table_token, "expected a table", "chunk or doc")
    table: Literal["chunk", "doc"] = "chunk" if table_token.value.lower() == "chunk" else "doc"
    parser.advance()

    fields: list[str] = []
    ignored: list[str] = []
    for name in raw_fields:
        qualified = _qualify(name, table)
        if qualified is None:
            ignored.append(name)
        elif qualified not in fields:
            fields.append(qualified)

    semantic = lexical = None
    if parser.at_keyword("USING"):
        parser.advance()
        while True:
            token = parser.current
            if not (token.kind == "ident" and token.value.lower() in ("semantic", "lexical")):
                raise syntax_error(
                    token, "expected a search function", "semantic(...) or lexical(...)"
                )
            parser.advance()
            parser.expect_punct("(")
            argument = parser.current
            if argument.kind != "string":
                raise syntax_error(argument, "expected the search text", "a quoted string")
            parser.advance()
            parser.expect_punct(")")
            if not argument.value.strip():
                raise syntax_error(argument, "the search text is empty", "a non-empty string")
            name = token.value.lower()
            if (semantic if name == "semantic" else lexical) is not None:
                raise syntax_error(token, f"{name}() given twice", "at most one of each function")
            if name == "semantic":
                semantic = argument.value
            else:
                lexical = argument.value
            if not parser.at_punct(","):
                break
            parser.advance()

    expr = None
    if parser.at_keyword("FILTER", "WHERE"):
        parser.advance()
        expr = parser.parse_expr()

    order_by: str | None = None
    descending = True
    if parser.at_keyword("ORDER"):
        parser.advance()
        parser.expect_keyword("BY")
        token = parser.current
        qualified = _qualify(token.value, table) if token.kind == "ident" else None
        if qualified is None or qualified in ("*", "doc.size"):
            raise syntax_error(token, "expected an ORDER BY field", "score or a qualified field")
        if qualified == "doc.tag":
            raise syntax_error(token, "cannot order by doc.tag (a document has several)", "a field")
        parser.advance()
        order_by = qualified
        descending = qualified == "score"  # score defaults to best first, fields to ascending
        if parser.at_keyword("ASC", "DESC"):
            descending = parser.advance().value.upper() == "DESC"

    limit: int | None = None
    offset = 0
    if parser.at_keyword("LIMIT"):
        parser.advance()
        limit = _bounded_int(parser, "LIMIT", 1, MAX_LIMIT)
        if parser.at_keyword("OFFSET"):
            parser.advance()
            offset = _bounded_int(parser, "OFFSET", 0, MAX_OFFSET)
    if parser.at_punct(";"):
        parser.advance()
    if parser.current.kind != "end":
        raise syntax_error(
            parser.current, "unexpected text", "USING, FILTER, ORDER BY, LIMIT, ';' or the end"
        )
    return RqlQuery(
        table=table,
        fields=tuple(fields),
        semantic=semantic,
        lexical=lexical,
        filter=expr,
        order_by=order_by,
        descending=descending,
        limit=limit,
        offset=offset,
        ignored_fields=tuple(ignored),
    )


def _bounded_int(parser: Parser, clause: str, low: int, high: int) -> int:
    token = parser.current
    if token.kind != "number" or not token.value.lstrip("+-").isdigit():
        raise syntax_error(token, f"{clause} needs a whole number", "an integer")
    value = int(token.value)
    if not low <= value <= high:
        raise QuerySyntaxError(
            f"{clause} {value} is out of range",
            line=token.line,
            column=token.column,
            expected=f"an integer from {low} to {high}",
            hint=f"use {clause} between {low} and {high}",
        )
    parser.advance()
    return value
