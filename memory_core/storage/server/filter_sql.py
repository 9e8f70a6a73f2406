"""Compile a :mod:`memory_core.filters` tree into a parameterised fragment for a server backend.

The server twin of ``sqlite/filter_sql.py``, with the same meaning for every operator: the
fragment refers to ``item`` and ``resource`` (the caller LEFT JOINs ``resource``), every value
is a ``%s`` parameter, tags are JSON arrays (``tags = 'x'``: has the tag x), ``LIKE`` is
case-sensitive with no escape character (as SQLite's GLOB rewrite), ``GLOB`` has path
semantics (``*`` within a segment, ``**`` across) through a regular expression, ``!=`` holds
for a missing value, and metadata values compare as JSON (numbers as numbers). What PostgreSQL
and MySQL spell differently comes from the :class:`~memory_core.storage.server.dialect.Dialect`.
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
from memory_core.storage.server.dialect import Dialect

__all__ = ["CompiledFilter", "compile_filter", "order_column", "scope_kind_where"]

_NUMBER_COLUMNS = frozenset(
    {
        "item.start_offset",
        "item.token_count",
        "item.importance",
        "item.pinned",
        "item.repeat_count",
        "item.category_id",
        "item.resource_id",
    }
)


@dataclass(frozen=True, slots=True)
class CompiledFilter:
    """A WHERE fragment with its parameters; ``resource_only`` when it reads no item field."""

    sql: str
    params: tuple[Any, ...]
    resource_only: bool


def scope_kind_where(
    scope_key: str | None, kinds: tuple[str, ...] | list[str], *, table: str = "item"
) -> tuple[str, list[Any]]:
    """``deleted = 0 AND scope = %s AND kind IN (…)`` over ``table`` (kinds are checked
    against the registry and written as literals, for the partial indexes)."""
    from memory_core.kinds import check_item_kind

    clauses, params = [f"{table}.deleted = 0"], []
    if scope_key is not None:
        clauses.append(f"{table}.scope = %s")
        params.append(scope_key)
    if kinds:
        literals = ",".join(f"'{check_item_kind(k)}'" for k in dict.fromkeys(kinds))
        clauses.append(f"{table}.kind IN ({literals})")
    return " AND ".join(clauses), params


def order_column(name: str, dialect: Dialect) -> str:
    """The SQL expression of a catalog field, for ORDER BY (checked against the catalog).

    Raises:
        InvalidInputError: not a known field.
    """
    field_type(name)
    meta = meta_key(name)
    if meta is not None:
        return dialect.json_value(f"{meta[0]}.metadata", meta[1])
    return name


def _value(field: str, value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if field in _NUMBER_COLUMNS and isinstance(value, str):
        try:
            return float(value) if "." in value else int(value)
        except ValueError:
            return value
    return value


class _Compiler:
    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect
        self.params: list[Any] = []

    def _regex(self, pattern: str) -> str:
        self.params.append("^" + glob_to_regex(pattern).pattern)
        return f"{self.d.regex} %s"

    def compare(self, node: Compare) -> str:
        d, params = self.d, self.params
        meta = meta_key(node.field)
        if node.field.endswith(".tags"):
            column = node.field
            if node.op == "GLOB":
                return d.array_exists(column, self._regex(str(node.value)))
            params.append(str(node.value))
            if node.op == "LIKE":
                return d.array_exists(column, d.like)
            if node.op == "!=":
                return "NOT " + d.array_exists(column, "= %s")
            return d.array_exists(column, f"{node.op} %s")
        if meta is not None:
            table, key = meta
            if node.op in ("LIKE", "GLOB"):
                column = d.json_text(f"{table}.metadata", key)
            else:
                column, mark, param = d.json_compare(f"{table}.metadata", key, node.value)
                params.append(param)
                if node.op == "!=":
                    return d.distinct(column, mark)
                return f"{column} {node.op} {mark}"
        else:
            column = node.field
        if node.op == "LIKE":
            params.append(str(node.value))
            return f"coalesce({d.text(column)} {d.like}, false)"
        if node.op == "GLOB":
            return f"coalesce({d.text(column)} {self._regex(str(node.value))}, false)"
        params.append(_value(node.field, node.value))
        if node.op == "!=":
            return d.distinct(column, "%s")
        return f"{column} {node.op} %s"

    def in_list(self, node: InList) -> str:
        d, params = self.d, self.params
        if not node.values:
            return "true" if node.negated else "false"
        marks = ",".join(["%s"] * len(node.values))
        meta = meta_key(node.field)
        if node.field.endswith(".tags"):
            params.extend(str(v) for v in node.values)
            sql = d.array_exists(node.field, f"IN ({marks})")
            return f"NOT {sql}" if node.negated else sql
        if meta is not None:
            sides = [d.json_compare(f"{meta[0]}.metadata", meta[1], v) for v in node.values]
            params.extend(param for _, _, param in sides)
            if len({column for column, _, _ in sides}) > 1:  # MySQL: values of several types
                any_of = " OR ".join(f"{column} = {mark}" for column, mark, _ in sides)
                return f"{'NOT ' if node.negated else ''}coalesce(({any_of}), false)"
            column = sides[0][0]
            marks = ",".join(mark for _, mark, _ in sides)
        else:
            column = node.field
            params.extend(_value(node.field, v) for v in node.values)
        if node.negated:
            return f"coalesce({column} NOT IN ({marks}), true)"
        return f"coalesce({column} IN ({marks}), false)"

    def compile(self, node: Filter) -> str:
        # Depth is bounded by check_filter (MAX_FILTER_DEPTH), so recursion is safe here.
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, InList):
            return self.in_list(node)
        if isinstance(node, Not):
            return f"NOT coalesce(({self.compile(node.operand)}), false)"
        assert isinstance(node, And | Or)
        if not node.operands:
            return "true" if isinstance(node, And) else "false"
        joiner = " AND " if isinstance(node, And) else " OR "
        return "(" + joiner.join(self.compile(op) for op in node.operands) + ")"


def compile_filter(node: Filter, dialect: Dialect) -> CompiledFilter:
    """The SQL fragment and parameters of ``node`` (checked first).

    Raises:
        InvalidInputError: an unknown field, or a filter too deep or too large.
    """
    check_filter(node)
    compiler = _Compiler(dialect)
    sql = compiler.compile(node)
    return CompiledFilter(
        sql=sql,
        params=tuple(compiler.params),
        resource_only=all(f.startswith("resource.") for f in iter_fields(node)),
    )
