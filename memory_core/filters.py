"""The filter syntax tree every backend compiles (DESIGN §9).

Features build filters from these nodes (FEL compiles to them; the memory layer and agent
memories build them directly) and storage backends translate them into their own SQL with
every value as a parameter. Field names are storage-neutral and come from one catalog, so no
backend imports a feature and no query text ever becomes SQL.

Fields:
- ``resource.*`` and ``item.*`` from :data:`FIELDS` (``*.tags`` means "has the tag");
- ``item.meta.<key>`` / ``resource.meta.<key>``: a top-level key of the JSON metadata, compared
  as text (or as a number when the value given is a number).

Operators: ``= != < <= > >=``, ``LIKE`` (case-sensitive, ``%`` and ``_``), ``GLOB`` (path
semantics: ``*`` within a segment, ``**`` across segments) and ``IN`` lists. A missing value is
"not equal" to anything, as users expect.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from memory_core.errors import InvalidInputError

__all__ = [
    "FIELDS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_TERMS",
    "And",
    "Compare",
    "Filter",
    "FilterType",
    "InList",
    "Not",
    "Or",
    "all_of",
    "check_filter",
    "field_type",
    "iter_fields",
]

FilterType = Literal["text", "number", "tags"]
Operator = Literal["=", "!=", "<", "<=", ">", ">=", "LIKE", "GLOB"]
Value = str | int | float

FIELDS: dict[str, FilterType] = {
    "resource.uid": "text",
    "resource.kind": "text",
    "resource.uri": "text",
    "resource.mtime": "text",
    "resource.content_hash": "text",
    "resource.source": "text",
    "resource.tags": "tags",
    "item.uid": "text",
    "item.kind": "text",
    "item.text": "text",
    "item.start_offset": "number",
    "item.token_count": "number",
    "item.importance": "number",
    "item.pinned": "number",
    "item.repeat_count": "number",
    "item.category_id": "number",
    "item.resource_id": "number",
    "item.created_at": "text",
    "item.updated_at": "text",
    "item.valid_to": "text",
    "item.tags": "tags",
}
_META = re.compile(r"^(item|resource)\.meta\.([A-Za-z_][A-Za-z0-9_]{0,63})$")
# Bounds every backend relies on: compilers recurse, and each term is a parameter.
MAX_FILTER_DEPTH = 64
MAX_FILTER_TERMS = 500


@dataclass(frozen=True, slots=True)
class Compare:
    field: str
    op: Operator
    value: Value


@dataclass(frozen=True, slots=True)
class InList:
    field: str
    values: tuple[Value, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Not:
    operand: Filter


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Filter, ...]


Filter = Compare | InList | Not | And | Or


def field_type(name: str) -> FilterType:
    """The type of a filter field.

    Raises:
        InvalidInputError: not a known field.
    """
    known = FIELDS.get(name)
    if known is not None:
        return known
    if _META.match(name):
        return "text"
    raise InvalidInputError(
        f"unknown filter field {name[:80]!r}",
        hint=f"use one of {', '.join(sorted(FIELDS))} or item.meta.<key>",
    )


def meta_key(name: str) -> tuple[str, str] | None:
    """``(table, key)`` for an ``item.meta.<key>`` / ``resource.meta.<key>`` field, else None."""
    match = _META.match(name)
    return (match.group(1), match.group(2)) if match else None


def all_of(*parts: Filter | None) -> Filter | None:
    """The conjunction of the given filters (None parts are skipped; None when all are)."""
    present = tuple(p for p in parts if p is not None)
    if not present:
        return None
    return present[0] if len(present) == 1 else And(present)


def iter_fields(node: Filter) -> Iterator[str]:
    """Every field a filter refers to (iteratively: no recursion limit)."""
    stack: list[Filter] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (Compare, InList)):
            yield current.field
        elif isinstance(current, Not):
            stack.append(current.operand)
        else:
            stack.extend(current.operands)


def check_filter(node: Filter) -> Filter:
    """Check fields, depth and size before a backend compiles ``node``.

    Raises:
        InvalidInputError: an unknown field, nesting deeper than :data:`MAX_FILTER_DEPTH`, or
            more than :data:`MAX_FILTER_TERMS` terms and values.
    """
    terms = 0
    stack: list[tuple[Filter, int]] = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_FILTER_DEPTH:
            raise InvalidInputError(
                f"filter nested deeper than {MAX_FILTER_DEPTH} levels",
                hint="flatten the filter: use IN lists instead of long OR chains",
            )
        if isinstance(current, Compare):
            field_type(current.field)
            terms += 1
        elif isinstance(current, InList):
            field_type(current.field)
            terms += max(1, len(current.values))
        elif isinstance(current, Not):
            stack.append((current.operand, depth + 1))
        else:
            stack.extend((op, depth + 1) for op in current.operands)
        if terms > MAX_FILTER_TERMS:
            raise InvalidInputError(
                f"filter has more than {MAX_FILTER_TERMS} terms and values",
                hint="narrow the filter, or split the query",
            )
    return node
