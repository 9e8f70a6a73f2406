"""The store's rows as domain values, and the values an update binds: alike on every backend.

SQLite and the server backends (PostgreSQL, MySQL/MariaDB) keep their own statements (SQLite's
are tuned for it: batched ``IN`` lists, FTS5, ``total_changes``), but they select the same
columns, read them back into the same models and bind the same values. Those pieces live here
once. Builders that write SQL text take the placeholder (``?`` or ``%s``) from the caller, so
each statement still reads as its backend's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.models import Category, EventRecord, RunRecord, Tombstone, utc_now
from memory_core.storage.ports import ResourceUpdate

__all__ = [
    "CATEGORY_COLUMNS",
    "EVENT_COLUMNS",
    "RUN_COLUMNS",
    "TOMBSTONE_COLUMNS",
    "category_from_row",
    "event_from_row",
    "from_signed64",
    "item_assignments",
    "payload_json",
    "resource_assignments",
    "run_from_row",
    "to_signed64",
    "tombstone_from_row",
]

CATEGORY_COLUMNS = "category_id, scope, parent_id, level, name, created_at, summary, metadata"
RUN_COLUMNS = "run_id, scope, kind, started_at, took_ms, payload"
EVENT_COLUMNS = "event_id, scope, kind, subject, created_at, payload"
TOMBSTONE_COLUMNS = "tombstone_id, scope, kind, uid, deleted_at, expires_at, payload"


def to_signed64(value: int | None) -> int | None:
    """SQL integers are signed 64-bit; a 64-bit SimHash is stored in two's complement."""
    if value is None:
        return None
    return value - (1 << 64) if value >= (1 << 63) else value


def from_signed64(value: int | None) -> int | None:
    if value is None:
        return None
    return value + (1 << 64) if value < 0 else value


def payload_json(value: Mapping[str, Any] | None) -> str:
    """A run's, event's or tombstone's payload as stored (sorted keys; unknown types as text)."""
    return json.dumps(dict(value or {}), ensure_ascii=False, sort_keys=True, default=str)


# -- rows to models ----------------------------------------------------------------------


def category_from_row(row: Sequence[Any]) -> Category:
    """A row of ``SELECT CATEGORY_COLUMNS``."""
    return Category(
        category_id=int(row[0]),
        scope=str(row[1]),
        parent_id=None if row[2] is None else int(row[2]),
        level=int(row[3]),
        name=str(row[4]),
        created_at=str(row[5]),
        summary=row[6],
        metadata=json.loads(row[7]),
    )


def run_from_row(r: Sequence[Any]) -> RunRecord:
    """A row of ``SELECT RUN_COLUMNS``."""
    return RunRecord(int(r[0]), str(r[1]), str(r[2]), str(r[3]), r[4], json.loads(r[5] or "{}"))


def event_from_row(r: Sequence[Any]) -> EventRecord:
    """A row of ``SELECT EVENT_COLUMNS``."""
    return EventRecord(int(r[0]), str(r[1]), str(r[2]), r[3], str(r[4]), json.loads(r[5] or "{}"))


def tombstone_from_row(r: Sequence[Any]) -> Tombstone:
    """A row of ``SELECT TOMBSTONE_COLUMNS``."""
    return Tombstone(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), r[5], json.loads(r[6]))


# -- the SET clause of an update ---------------------------------------------------------


def item_assignments(changes: Mapping[str, Any], mark: str) -> tuple[list[str], list[Any]]:
    """``column = mark`` assignments and their values for an item's ``changes`` (an
    :meth:`~memory_core.models.ItemUpdate.changes` without the vector), ending with
    ``updated_at``: tags and metadata as JSON, pinned as 0/1, the SimHash signed."""
    columns: list[str] = []
    params: list[Any] = []
    for name, value in changes.items():
        if name == "tags":
            value = json.dumps(list(value), ensure_ascii=False)
        elif name == "metadata":
            value = json.dumps(value, ensure_ascii=False, sort_keys=True)
        elif name == "pinned":
            value = int(value)
        elif name == "simhash":
            value = to_signed64(value)
        columns.append(f"{name} = {mark}")
        params.append(value)
    columns.append(f"updated_at = {mark}")
    params.append(utc_now())
    return columns, params


def resource_assignments(update: ResourceUpdate, mark: str) -> tuple[list[str], list[Any]]:
    """``column = mark`` assignments and their values for a resource ``update``, ending with
    ``updated_at`` (``clear_source`` sets the source to NULL)."""
    columns: list[str] = []
    params: list[Any] = []
    for name in ("content_hash", "uri", "mtime", "size", "source"):
        value = getattr(update, name)
        if value is not None:
            columns.append(f"{name} = {mark}")
            params.append(value)
    if update.clear_source:
        columns.append("source = NULL")
    if update.tags is not None:
        columns.append(f"tags = {mark}")
        params.append(json.dumps(list(update.tags), ensure_ascii=False))
    if update.deleted is not None:
        columns.append(f"deleted = {mark}")
        params.append(int(update.deleted))
    if update.metadata is not None:
        columns.append(f"metadata = {mark}")
        params.append(json.dumps(update.metadata, ensure_ascii=False, sort_keys=True))
    columns.append(f"updated_at = {mark}")
    params.append(utc_now())
    return columns, params
