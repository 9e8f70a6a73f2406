"""Compile a :mod:`memory_core.filters` tree into a parameterised PostgreSQL fragment.

The PostgreSQL twin of ``sqlite/filter_sql.py``, with the same meaning for every operator: the
fragment refers to ``item`` and ``resource`` (the caller LEFT JOINs ``resource``), every value
is a ``%s`` parameter, tags are JSON arrays (``tags = 'x'``: has the tag x), ``LIKE`` is
case-sensitive with no escape character (as SQLite's GLOB rewrite), ``GLOB`` has path
semantics (``*`` within a segment, ``**`` across) through a regular expression, ``!=`` holds
for a missing value, and metadata values compare as JSON (numbers as numbers).
"""

from __future__ import annotations

import json
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
_TAGS = (
    "EXISTS (SELECT 1 FROM jsonb_array_elements_text({column}::jsonb) AS tag(value) "
    "WHERE tag.value {cond})"
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
    """``deleted = 0 AND scope = %s AND kind IN (…)`` over ``table`` (kinds are checked by
    the caller against the registry and written as literals, for the partial indexes)."""
    from memory_core.kinds import check_item_kind

    clauses, params = [f"{table}.deleted = 0"], []
    if scope_key is not None:
        clauses.append(f"{table}.scope = %s")
        params.append(scope_key)
    if kinds:
        literals = ",".join(f"'{check_item_kind(k)}'" for k in dict.fromkeys(kinds))
        clauses.append(f"{table}.kind IN ({literals})")
    return " AND ".join(clauses), params


def order_column(name: str) -> str:
    """The SQL expression of a catalog field, for ORDER BY (checked against the catalog).

    Raises:
        InvalidInputError: not a known field.
    """
    field_type(name)
    meta = meta_key(name)
    if meta is not None:
        return f"({meta[0]}.metadata::jsonb -> '{meta[1]}')"
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


def _compare(node: Compare, params: list[Any]) -> str:
    meta = meta_key(node.field)
    if node.field.endswith(".tags"):
        column = node.field
        if node.op == "GLOB":
            params.append("^" + glob_to_regex(str(node.value)).pattern)
            return _TAGS.format(column=column, cond="~ %s")
        if node.op == "LIKE":
            params.append(str(node.value))
            return _TAGS.format(column=column, cond="LIKE %s ESCAPE ''")
        params.append(str(node.value))
        if node.op == "!=":
            return "NOT " + _TAGS.format(column=column, cond="= %s")
        return _TAGS.format(column=column, cond=f"{node.op} %s")
    if meta is not None:
        table, key = meta
        if node.op in ("LIKE", "GLOB"):
            column = f"({table}.metadata::jsonb ->> '{key}')"
        else:
            column = f"({table}.metadata::jsonb -> '{key}')"
            params.append(json.dumps(node.value))
            if node.op == "!=":
                return f"{column} IS DISTINCT FROM %s::jsonb"
            return f"{column} {node.op} %s::jsonb"
    else:
        column = node.field
    if node.op == "LIKE":
        params.append(str(node.value))
        return f"coalesce({column}::text LIKE %s ESCAPE '', false)"
    if node.op == "GLOB":
        params.append("^" + glob_to_regex(str(node.value)).pattern)
        return f"coalesce({column}::text ~ %s, false)"
    params.append(_value(node.field, node.value))
    if node.op == "!=":
        return f"{column} IS DISTINCT FROM %s"
    return f"{column} {node.op} %s"


def _in_list(node: InList, params: list[Any]) -> str:
    if not node.values:
        return "true" if node.negated else "false"
    marks = ",".join(["%s"] * len(node.values))
    meta = meta_key(node.field)
    if node.field.endswith(".tags"):
        params.extend(str(v) for v in node.values)
        sql = _TAGS.format(column=node.field, cond=f"IN ({marks})")
        return f"NOT {sql}" if node.negated else sql
    if meta is not None:
        column = f"({meta[0]}.metadata::jsonb -> '{meta[1]}')"
        params.extend(json.dumps(v) for v in node.values)
        marks = ",".join(["%s::jsonb"] * len(node.values))
    else:
        column = node.field
        params.extend(_value(node.field, v) for v in node.values)
    if node.negated:
        return f"coalesce({column} NOT IN ({marks}), true)"
    return f"coalesce({column} IN ({marks}), false)"


def _compile(node: Filter, params: list[Any]) -> str:
    # Depth is bounded by check_filter (MAX_FILTER_DEPTH), so recursion is safe here.
    if isinstance(node, Compare):
        return _compare(node, params)
    if isinstance(node, InList):
        return _in_list(node, params)
    if isinstance(node, Not):
        return f"NOT coalesce(({_compile(node.operand, params)}), false)"
    assert isinstance(node, And | Or)
    if not node.operands:
        return "true" if isinstance(node, And) else "false"
    joiner = " AND " if isinstance(node, And) else " OR "
    return "(" + joiner.join(_compile(op, params) for op in node.operands) + ")"


def compile_filter(node: Filter) -> CompiledFilter:
    """The SQL fragment and parameters of ``node`` (checked first).

    Raises:
        InvalidInputError: an unknown field, or a filter too deep or too large.
    """
    check_filter(node)
    params: list[Any] = []
    sql = _compile(node, params)
    return CompiledFilter(
        sql=sql,
        params=tuple(params),
        resource_only=all(f.startswith("resource.") for f in iter_fields(node)),
    )
