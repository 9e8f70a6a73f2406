"""Compile a FEL expression (``memory_core.documents.fel``) into parameterised SQL.

The fragment refers to ``item`` and ``resource`` (joined by the caller). Field names map to
columns through a fixed table; every value becomes a ``?`` parameter, so no text from a
query is ever spliced into SQL. ``doc.tag`` is a JSON array: ``doc.tag = 'x'`` means "has the
tag x". ``LIKE`` is case-sensitive (the spec: strings are case-sensitive), so it is rewritten
into SQLite's case-sensitive ``GLOB``; ``GLOB`` uses path semantics (``*`` within one path
segment, ``**`` across segments) through the ``memoir_glob`` function registered by
:func:`register_functions`.
"""

from __future__ import annotations

from typing import Any

from memory_core.documents.fel import And, Comparison, Expr, InList, Not, Or
from memory_core.globbing import glob_to_regex

__all__ = ["COLUMNS", "compile_filter", "like_to_glob", "register_functions"]

COLUMNS: dict[str, str] = {
    "doc.id": "resource.uid",
    "doc.path": "resource.uri",
    "doc.mtime": "resource.mtime",
    "doc.hash": "resource.content_hash",
    "doc.source": "resource.source",
    "chunk.id": "item.uid",
    "chunk.doc_id": "resource.uid",
    "chunk.offset": "item.start_offset",
    "chunk.tokens": "item.token_count",
    "chunk.text": "item.text",
}
_TAG_SQL = "EXISTS (SELECT 1 FROM json_each(resource.tags) AS tag WHERE tag.value {cond})"


def like_to_glob(pattern: str) -> str:
    """A SQL LIKE pattern (``%``, ``_``) as an equivalent case-sensitive GLOB pattern."""
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
    """Register ``memoir_glob(pattern, value)`` on ``conn`` (cheap; call before filtering)."""
    conn.create_function("memoir_glob", 2, _memoir_glob, deterministic=True)


def _comparison(node: Comparison, params: list[Any]) -> str:
    if node.op == "LIKE":
        params.append(like_to_glob(str(node.value)))
        sql_op = "GLOB"
    elif node.op == "GLOB":
        params.append(str(node.value))
        sql_op = "memoir_glob"
    else:
        params.append(node.value)
        sql_op = node.op
    if node.field == "doc.tag":
        if sql_op == "memoir_glob":
            return _TAG_SQL.format(cond="IS NOT NULL AND memoir_glob(?, tag.value)")
        if node.op == "!=":
            return "NOT " + _TAG_SQL.format(cond="= ?")
        return _TAG_SQL.format(cond=f"{sql_op} ?")
    column = COLUMNS[node.field]
    if sql_op == "memoir_glob":
        return f"coalesce(memoir_glob(?, {column}), 0)"
    if node.op == "!=":
        return f"{column} IS NOT ?"  # a missing value is "not equal", as a user expects
    return f"{column} {sql_op} ?"


def _compile(node: Expr, params: list[Any]) -> str:
    if isinstance(node, Comparison):
        return _comparison(node, params)
    if isinstance(node, InList):
        marks = ",".join("?" * len(node.values))
        params.extend(node.values)
        if node.field == "doc.tag":
            sql = _TAG_SQL.format(cond=f"IN ({marks})")
            return f"NOT {sql}" if node.negated else sql
        column = COLUMNS[node.field]
        if node.negated:
            return f"coalesce({column} NOT IN ({marks}), 1)"
        return f"{column} IN ({marks})"
    if isinstance(node, Not):
        return f"NOT coalesce(({_compile(node.operand, params)}), 0)"
    if isinstance(node, And):
        return "(" + " AND ".join(_compile(op, params) for op in node.operands) + ")"
    if isinstance(node, Or):
        return "(" + " OR ".join(_compile(op, params) for op in node.operands) + ")"
    raise TypeError(f"not a filter node: {node!r}")  # pragma: no cover


def compile_filter(expr: Expr) -> tuple[str, list[Any]]:
    """``(sql, params)`` for ``expr`` over ``item`` and ``resource`` (joined by the caller)."""
    params: list[Any] = []
    return _compile(expr, params), params
