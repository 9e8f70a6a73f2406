"""Backups of a whole store: every kind of memory as JSONL, restored into any store.

``memoir export`` writes the ``memoir-store/1`` format: a header line (format, embedder id and
dimension, scope fields), then one JSON object per stored row, table by table — resources,
categories, entities, items (documents' chunks, rule directives, knowledge chunks, agent
memories…, each with its vector as base64 float32), supersession links, relations,
observations, tombstones, events, runs and the store's settings. Rows carry no ids:
references are natural keys (uids, entity kind and key, category paths), so a backup restores
into a fresh store of any backend (``memoir export | memoir --db postgresql://… import -``),
re-importing changes nothing, and a restored store exports to the same bytes.

When the importing store uses another embedder than the export, items are re-embedded and the
report says so. Files are written owner-only (0600): a backup holds everything but secrets,
which are redacted like on every other surface (the text keeps ``[REDACTED:<kind>]``).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from memory_core.context import CoreContext
from memory_core.errors import InvalidInputError
from memory_core.models import embedding_text
from memory_core.redaction import redact_value
from memory_core.scope import Scope

__all__ = [
    "BACKUP_FORMAT",
    "BackupReport",
    "RestoreReport",
    "export_store",
    "import_store",
    "is_store_backup",
    "open_private",
    "redact_record",
]

BACKUP_FORMAT = "memoir-store/1"
_BATCH = 500


@dataclass
class BackupReport:
    records: int = 0
    out: str | None = None


@dataclass
class RestoreReport:
    records: int = 0
    written: dict[str, int] = field(default_factory=dict)
    reembedded: bool = False
    warnings: list[str] = field(default_factory=list)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def open_private(path: Path) -> IO[str]:
    """``path`` opened for writing, created owner-only (0600) before any byte is written."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # an existing file keeps its mode otherwise
    return os.fdopen(descriptor, "w", encoding="utf-8")


async def export_store(ctx: CoreContext, out: IO[str], *, scope: Scope | None) -> BackupReport:
    """Write every row of the store (of ``scope``, or all) to ``out`` as ``memoir-store/1``."""
    out.write(
        _line(
            {
                "type": "header",
                "format": BACKUP_FORMAT,
                "embedder": ctx.embedder.embedder_id,
                "dimension": ctx.embedder.dimension,
                "scope_fields": list(ctx.store.scope_schema.fields),
            }
        )
    )

    def sink(record: dict[str, Any]) -> None:
        out.write(_line(redact_record(record)))

    return BackupReport(records=await ctx.store.dump(scope, sink))


def redact_record(record: dict[str, Any]) -> dict[str, Any]:
    """A backup record with every secret in its text replaced (issue 14: exports are a surface
    like any other); the base64 ``embedding`` is left exactly as it is."""
    return {k: v if k == "embedding" else redact_value(v) for k, v in record.items()}


def is_store_backup(first_line: str) -> bool:
    """Whether a file's first line is a ``memoir-store/1`` header."""
    try:
        header = json.loads(first_line)
    except json.JSONDecodeError:
        return False
    return isinstance(header, dict) and header.get("format") == BACKUP_FORMAT


def _records(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(
                f"line {number} of the backup is not JSON: {exc.msg}",
                hint="import a file written by `memoir export`",
            ) from exc
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise InvalidInputError(
                f"line {number} of the backup has no record type",
                hint="import a file written by `memoir export`",
            )
        yield number, record


async def import_store(ctx: CoreContext, lines: Iterable[str]) -> RestoreReport:
    """Restore a ``memoir-store/1`` backup, batch by batch (one transaction each).

    Raises:
        InvalidInputError: not a memoir backup, another scope schema, or a malformed line
            (named by its number; batches before it are kept).
    """
    records = _records(lines)
    first = next(records, None)
    if first is None or first[1].get("format") != BACKUP_FORMAT:
        raise InvalidInputError(
            "the file is not a memoir backup (no memoir-store/1 header)",
            hint="import a file written by `memoir export`",
        )
    header = first[1]
    fields = list(ctx.store.scope_schema.fields)
    if header.get("scope_fields", ["scope"]) != fields:
        raise InvalidInputError(
            f"the backup's scope fields {header.get('scope_fields')} differ from this store's "
            f"{fields}",
            hint="import into a store created with the same scope fields",
        )
    same = (
        header.get("embedder") == ctx.embedder.embedder_id
        and header.get("dimension") == ctx.embedder.dimension
    )
    report = RestoreReport(reembedded=not same)
    if not same:
        report.warnings.append(
            f"the backup was made with the embedder {header.get('embedder')!r}; its items were "
            f"re-embedded with {ctx.embedder.embedder_id!r}"
        )
    batch: list[dict[str, Any]] = []

    async def flush() -> None:
        if not batch:
            return
        if not same:
            items = [r for r in batch if r.get("type") == "item"]
            if items:
                vectors = await ctx.embedder.embed_documents(
                    [embedding_text(str(r.get("text", "")), r.get("metadata")) for r in items]
                )
                for record, vector in zip(items, vectors, strict=True):
                    blob = np.asarray(vector, dtype="<f4").tobytes()
                    record["embedding"] = base64.b64encode(blob).decode("ascii")
        written = await ctx.store.restore(batch)
        for kind, n in written.items():
            report.written[kind] = report.written.get(kind, 0) + n
        report.records += len(batch)
        batch.clear()

    for _, record in records:
        batch.append(record)
        if len(batch) >= _BATCH:
            await flush()
    await flush()
    return report
