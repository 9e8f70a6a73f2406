"""Compile a :mod:`memory_core.filters` tree into a parameterised SQLite fragment.

The fragment refers to ``item`` and ``resource`` (the caller LEFT JOINs ``resource`` on
``item.resource_id``). Fields map to columns through a fixed table and every value becomes a
``?`` parameter, so no text from a query ever becomes SQL. Tags are JSON arrays: ``tags = 'x'``
means "has the tag x". ``LIKE`` is case-sensitive (rewritten to SQLite's ``GLOB``); ``GLOB``
has path semantics (``*`` within a segment, ``**`` across) through the ``memoir_glob``
function that :func:`register_functions` installs on a connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_core.filters import (
    And,
    Compare,
    Filter,
    InList,
    Not,
    Or,
    check_filter,
    field_type,
    iter_fields,
    meta_key,
)
from memory_core.globbing import glob_to_regex

__all__ = [
    "COLUMNS",
    "CompiledFilter",
    "compile_filter",
    "like_to_glob",
    "order_column",
    "register_functions",
]

COLUMNS: dict[str, str] = {
    "resource.uid": "resource.uid",
    "resource.kind": "resource.kind",
    "resource.uri": "resource.uri",
    "resource.mtime": "resource.mtime",
    "resource.content_hash": "resource.content_hash",
    "resource.source": "resource.source",
    "resource.tags": "resource.tags",
    "item.uid": "item.uid",
    "item.kind": "item.kind",
    "item.text": "item.text",
    "item.start_offset": "item.start_offset",
    "item.token_count": "item.token_count",
    "item.importance": "item.importance",
    "item.pinned": "item.pinned",
    "item.repeat_count": "item.repeat_count",
    "item.category_id": "item.category_id",
    "item.resource_id": "item.resource_id",
    "item.created_at": "item.created_at",
    "item.updated_at": "item.updated_at",
    "item.valid_to": "item.valid_to",
    "item.tags": "item.tags",
}
_TAGS = "EXISTS (SELECT 1 FROM json_each({column}) AS tag WHERE tag.value {cond})"


@dataclass(frozen=True, slots=True)
class CompiledFilter:
    """A WHERE fragment with its parameters; ``resource_only`` when it reads no item field."""

    sql: str
    params: tuple[Any, ...]
    resource_only: bool
    needs_glob: bool


def like_to_glob(pattern: str) -> str:
    """A SQL LIKE pattern (``%``, ``_``) as the equivalent case-sensitive GLOB pattern."""
    out: list[str] = []
    for char in pattern:
        if char == "%":
            out.append("*")
        elif char == "_":
            out.append("?")
        elif char in "*?[":
            out.append(f"[{char}]")
        else:
            out.append(char)
    return "".join(out)


def _memoir_glob(pattern: Any, value: Any) -> int | None:
    if pattern is None or value is None:
        return None
    return 1 if glob_to_regex(str(pattern)).match(str(value)) else 0


def register_functions(conn: Any) -> None:
    """Install ``memoir_glob(pattern, value)`` on ``conn`` (cheap; idempotent)."""
    conn.create_function("memoir_glob", 2, _memoir_glob, deterministic=True)


def order_column(name: str) -> str:
    """The SQL expression of a catalog field, for ORDER BY (checked against the catalog).

    Raises:
        InvalidInputError: not a known field.
    """
    field_type(name)
    return _column(name)


def _column(name: str) -> str:
    meta = meta_key(name)
    if meta is not None:
        table, key = meta
        return f"json_extract({table}.metadata, '$.{key}')"
    return COLUMNS[name]


def _compare(node: Compare, params: list[Any]) -> str:
    column = _column(node.field)
    if node.op == "LIKE":
        params.append(like_to_glob(str(node.value)))
        op = "GLOB"
    elif node.op == "GLOB":
        params.append(str(node.value))
        op = "memoir_glob"
    else:
        params.append(node.value)
        op = node.op
    if node.field.endswith(".tags"):
        if op == "memoir_glob":
            return _TAGS.format(column=column, cond="IS NOT NULL AND memoir_glob(?, tag.value)")
        if node.op == "!=":
            return "NOT " + _TAGS.format(column=column, cond="= ?")
        return _TAGS.format(column=column, cond=f"{op} ?")
    if op == "memoir_glob":
        return f"coalesce(memoir_glob(?, {column}), 0)"
    if node.op == "!=":
        return f"{column} IS NOT ?"  # a missing value is "not equal", as a user expects
    return f"{column} {op} ?"


def _in_list(node: InList, params: list[Any]) -> str:
    if not node.values:
        return "1" if node.negated else "0"
    column = _column(node.field)
    marks = ",".join("?" * len(node.values))
    params.extend(node.values)
    if node.field.endswith(".tags"):
        sql = _TAGS.format(column=column, cond=f"IN ({marks})")
        return f"NOT {sql}" if node.negated else sql
    if node.negated:
        return f"coalesce({column} NOT IN ({marks}), 1)"
    return f"{column} IN ({marks})"


def _compile(node: Filter, params: list[Any]) -> str:
    # Depth is bounded by check_filter (MAX_FILTER_DEPTH), so recursion is safe here.
    if isinstance(node, Compare):
        return _compare(node, params)
    if isinstance(node, InList):
        return _in_list(node, params)
    if isinstance(node, Not):
        return f"NOT coalesce(({_compile(node.operand, params)}), 0)"
    joiner = " AND " if isinstance(node, And) else " OR "
    assert isinstance(node, (And, Or))
    if not node.operands:
        return "1" if isinstance(node, And) else "0"
    return "(" + joiner.join(_compile(op, params) for op in node.operands) + ")"


def compile_filter(node: Filter) -> CompiledFilter:
    """The SQL fragment and parameters of ``node`` (checked first).

    Raises:
        InvalidInputError: an unknown field, or a filter too deep or too large.
    """
    check_filter(node)
    params: list[Any] = []
    sql = _compile(node, params)
    fields = list(iter_fields(node))
    return CompiledFilter(
        sql=sql,
        params=tuple(params),
        resource_only=all(f.startswith("resource.") for f in fields),
        needs_glob="memoir_glob" in sql,
    )
