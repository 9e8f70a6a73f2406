"""What the SQL layer stores (SQLite, PostgreSQL) build and read alike.

The two stores keep their own schema, search and transactions; the statements' column lists,
the parameters of a row and the mapping of a result row back to a layer row are the same on
both and live here. What differs stays explicit at the call: the placeholder (``?`` / ``%s``),
how a scope selector becomes a WHERE clause (:func:`scope_where` takes the spelling), how an
embedding comes back, and whether text is cleaned first (PostgreSQL text cannot hold NUL).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from memory_core.storage.layer.port import (
    CategoryRow,
    IntentionRow,
    ItemRow,
    ResourceRow,
    RevisionRow,
    RunRow,
    ScopeFilter,
    ScopeValues,
)

__all__ = [
    "CATEGORY_COLUMNS",
    "INTENTION_COLUMNS",
    "ITEM_COLUMNS",
    "META_TABLE_DDL",
    "RESOURCE_COLUMNS",
    "REVISION_SELECT",
    "RUN_COLUMNS",
    "SCOPED_TABLES",
    "Clean",
    "Placeholder",
    "category_params",
    "category_row",
    "get_meta_sql",
    "intention_params",
    "intention_row",
    "item_row",
    "item_values",
    "marks",
    "meta_param",
    "meta_value",
    "quote_ident",
    "resource_params",
    "resource_row",
    "revision_insert",
    "revision_row",
    "run_insert",
    "run_row",
    "scope_columns",
    "scope_of",
    "scope_params",
    "scope_where",
    "set_meta_sql",
]

Placeholder = Literal["?", "%s"]
Clean = Callable[[str | None], str | None]
"""What a store does to free text before writing it (nothing on SQLite)."""

SCOPED_TABLES = ("layer_resource", "layer_item", "layer_category", "layer_intention")
RESOURCE_COLUMNS = (
    "resource_id, kind, uri, content, content_hash, mime, metadata, artifacts, "
    "pipeline_revision, created_at"
)
ITEM_COLUMNS = (
    "item_id, resource_id, text, evidence, confidence, stability, version, category_key, "
    "status, embedding, created_at, updated_at"
)
CATEGORY_COLUMNS = "category_key, name, description, summary, anchor_ids, item_count, updated_at"
INTENTION_COLUMNS = "version, goals, constraints, progress, source_item_ids, created_at"
RUN_COLUMNS = "run_id, kind, body, created_at"
REVISION_SELECT = (
    "SELECT revision, change, pipelines, created_at FROM layer_revision ORDER BY revision"
)
META_TABLE_DDL = "CREATE TABLE IF NOT EXISTS layer_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def _keep(text: str | None) -> str | None:
    return text


# -- building ----------------------------------------------------------------------------


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted identifier (a scope field may be any word)."""
    return '"' + name.replace('"', '""') + '"'


def scope_columns(fields: Sequence[str], alias: str = "") -> str:
    return ", ".join(alias + quote_ident(f) for f in fields)


def marks(mark: Placeholder, count: int) -> str:
    return ", ".join([mark] * count)


def scope_where(
    selector: ScopeFilter, *, mark: Placeholder, alias: str = ""
) -> tuple[str, list[Any]]:
    """``(sql, params)`` for a selector; a field allowed ANY adds nothing.

    SQLite (``?``) spells a set of values ``field IN (?, …)`` with one parameter each and the
    truth values ``1`` / ``0``; PostgreSQL (``%s``) passes the set as one text array
    (``field = ANY(%s::text[])``) and spells ``true`` / ``false``.
    """
    pg = mark == "%s"
    parts: list[str] = []
    params: list[Any] = []
    for name, allowed in selector.items():
        if allowed is None:
            continue
        column = alias + quote_ident(name)
        if not allowed:
            parts.append("false" if pg else "0")
        elif len(allowed) == 1:
            parts.append(f"{column} = {mark}")
            params.append(allowed[0])
        elif pg:
            parts.append(f"{column} = ANY(%s::text[])")
            params.append(list(allowed))
        else:
            parts.append(f"{column} IN ({marks('?', len(allowed))})")
            params.extend(allowed)
    return (" AND ".join(parts) or ("true" if pg else "1")), params


def get_meta_sql() -> str:
    return "SELECT value FROM layer_meta WHERE key = 'service_meta'"


def set_meta_sql(mark: Placeholder) -> str:
    return (
        f"INSERT INTO layer_meta(key, value) VALUES ('service_meta', {mark}) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
    )


def revision_insert(mark: Placeholder) -> str:
    return (
        "INSERT INTO layer_revision(revision, change, pipelines, created_at) "
        f"VALUES ({marks(mark, 4)})"
    )


def run_insert(mark: Placeholder) -> str:
    return f"INSERT INTO layer_run({RUN_COLUMNS}) VALUES ({marks(mark, 4)})"


# -- a row's parameters ------------------------------------------------------------------


def scope_params(fields: Sequence[str], scope: ScopeValues) -> list[str]:
    return [scope[f] for f in fields]


def resource_params(fields: Sequence[str], row: ResourceRow, clean: Clean = _keep) -> list[Any]:
    """The parameters of ``(scope…, RESOURCE_COLUMNS)``."""
    return [
        *scope_params(fields, row.scope),
        row.resource_id,
        row.kind,
        clean(row.uri),
        clean(row.content),
        row.content_hash,
        row.mime,
        json.dumps(row.metadata),
        json.dumps(row.artifacts),
        row.pipeline_revision,
        row.created_at,
    ]


def item_values(fields: Sequence[str], row: ItemRow, text: str, embedding: Any) -> list[Any]:
    """The parameters of ``(scope…, ITEM_COLUMNS)``, with the stored ``text`` and ``embedding``."""
    return [
        *scope_params(fields, row.scope), row.item_id, row.resource_id, text,
        json.dumps(row.evidence), row.confidence, row.stability, row.version,
        row.category_key, row.status, embedding, row.created_at, row.updated_at,
    ]  # fmt: skip


def category_params(fields: Sequence[str], row: CategoryRow, clean: Clean = _keep) -> list[Any]:
    """The parameters of ``(scope…, CATEGORY_COLUMNS)``."""
    return [
        *scope_params(fields, row.scope),
        row.category_key,
        clean(row.name),
        clean(row.description),
        clean(row.summary),
        json.dumps(row.anchor_ids),
        row.item_count,
        row.updated_at,
    ]


def intention_params(fields: Sequence[str], row: IntentionRow) -> list[Any]:
    """The parameters of ``(scope…, INTENTION_COLUMNS)``."""
    return [
        *scope_params(fields, row.scope),
        row.version,
        json.dumps(row.goals),
        json.dumps(row.constraints),
        json.dumps(row.progress),
        json.dumps(row.source_item_ids),
        row.created_at,
    ]


# -- reading a row back ------------------------------------------------------------------


def scope_of(fields: Sequence[str], row: Sequence[Any]) -> ScopeValues:
    """The scope values that lead a result row (its first ``len(fields)`` columns)."""
    return {f: str(v) for f, v in zip(fields, row[: len(fields)], strict=True)}


def resource_row(fields: Sequence[str], row: Sequence[Any]) -> ResourceRow:
    """A row of ``SELECT scope…, RESOURCE_COLUMNS``."""
    r = row[len(fields) :]
    return ResourceRow(
        resource_id=r[0],
        scope=scope_of(fields, row),
        kind=r[1],
        uri=r[2],
        content=r[3],
        content_hash=r[4],
        mime=r[5],
        metadata=json.loads(r[6]),
        artifacts=json.loads(r[7]),
        pipeline_revision=r[8],
        created_at=r[9],
    )


def item_row(
    fields: Sequence[str], row: Sequence[Any], embedding: Callable[[Any], np.ndarray]
) -> ItemRow:
    """A row of ``SELECT scope…, ITEM_COLUMNS``; ``embedding`` reads a stored vector."""
    r = row[len(fields) :]
    return ItemRow(
        item_id=r[0],
        scope=scope_of(fields, row),
        resource_id=r[1],
        text=r[2],
        evidence=json.loads(r[3]),
        confidence=r[4],
        stability=r[5],
        version=r[6],
        category_key=r[7],
        status=r[8],
        embedding=None if r[9] is None else embedding(r[9]),
        created_at=r[10],
        updated_at=r[11],
    )


def category_row(fields: Sequence[str], row: Sequence[Any]) -> CategoryRow:
    """A row of ``SELECT scope…, CATEGORY_COLUMNS``."""
    r = row[len(fields) :]
    return CategoryRow(
        scope=scope_of(fields, row),
        category_key=r[0],
        name=r[1],
        description=r[2],
        summary=r[3],
        anchor_ids=json.loads(r[4]),
        item_count=r[5],
        updated_at=r[6],
    )


def intention_row(fields: Sequence[str], row: Sequence[Any]) -> IntentionRow:
    """A row of ``SELECT scope…, INTENTION_COLUMNS``."""
    r = row[len(fields) :]
    return IntentionRow(
        scope=scope_of(fields, row),
        version=r[0],
        goals=json.loads(r[1]),
        constraints=json.loads(r[2]),
        progress=json.loads(r[3]),
        source_item_ids=json.loads(r[4]),
        created_at=r[5],
    )


def revision_row(r: Sequence[Any]) -> RevisionRow:
    """A row of :data:`REVISION_SELECT`."""
    return RevisionRow(revision=r[0], change=r[1], pipelines=json.loads(r[2]), created_at=r[3])


def run_row(r: Sequence[Any]) -> RunRow:
    """A row of ``SELECT RUN_COLUMNS``."""
    return RunRow(run_id=r[0], kind=r[1], body=json.loads(r[2]), created_at=r[3])


def meta_value(rows: Sequence[Any]) -> dict[str, Any] | None:
    """The service meta from the rows of :func:`get_meta_sql` (None before it was set)."""
    return json.loads(rows[0][0]) if rows else None


def meta_param(meta: Mapping[str, Any]) -> str:
    return json.dumps(dict(meta), sort_keys=True)
