"""JSONL export and import of documents with their chunks and vectors.

Line 1 is a header (format, embedder id and dimension); then, per document in path order, a
``doc`` line followed by its ``chunk`` lines in offset order. Vectors travel as base64 float32,
so an import into a store with the same embedder needs no re-embedding; with another embedder
the chunks are re-embedded and the report says so. Import is idempotent (stable ids).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from memory_core.documents import persistence
from memory_core.documents.records import CHUNK_KIND, NewDocument
from memory_core.documents.responses import ExportReport, ImportReport
from memory_core.errors import InvalidInputError
from memory_core.models import NewItem, content_hash
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.context import CoreContext

__all__ = ["EXPORT_FORMAT", "export_jsonl", "import_jsonl"]

EXPORT_FORMAT = "memoir-documents/1"


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


async def export_jsonl(ctx: CoreContext, out: IO[str], *, scope: Scope | None) -> ExportReport:
    """Write the scope's documents (every scope when None) as JSONL to ``out``."""
    out.write(
        _line(
            {
                "type": "header",
                "format": EXPORT_FORMAT,
                "embedder": ctx.embedder.embedder_id,
                "dimension": ctx.embedder.dimension,
            }
        )
    )
    docs = await ctx.store.read(lambda tx: list(persistence.iter_export(tx, scope)))
    documents = chunks = 0
    for doc in docs:
        doc_chunks = await ctx.store.read(
            lambda tx, d=doc: persistence.document_chunks(tx, d)  # type: ignore[misc]
        )
        out.write(
            _line(
                {
                    "type": "doc",
                    "id": doc.doc_id,
                    "scope": doc.scope,
                    "path": doc.path,
                    "hash": doc.content_hash,
                    "mtime": doc.mtime,
                    "size": doc.size,
                    "tags": list(doc.tags),
                    "source": doc.source,
                }
            )
        )
        chunk_ids = [c.item_id for c in doc_chunks]
        vectors = await ctx.store.read(lambda tx, ids=chunk_ids: tx.vectors.vectors(ids))  # type: ignore[misc]
        for chunk in doc_chunks:
            vector = vectors.get(chunk.item_id)
            out.write(
                _line(
                    {
                        "type": "chunk",
                        "id": chunk.chunk_id,
                        "doc_id": doc.doc_id,
                        "offset": chunk.offset,
                        "end_offset": chunk.end_offset,
                        "tokens": chunk.tokens,
                        "text": chunk.text,
                        "embedding": base64.b64encode(
                            np.asarray(vector, dtype="<f4").tobytes()
                        ).decode("ascii")
                        if vector is not None
                        else None,
                    }
                )
            )
            chunks += 1
        documents += 1
    return ExportReport(documents=documents, chunks=chunks)


def _records(lines: Iterator[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(
                f"line {number} of the import is not JSON: {exc.msg}",
                hint="import a file written by `memoir export`",
            ) from exc
        if not isinstance(record, dict) or "type" not in record:
            raise InvalidInputError(
                f"line {number} of the import has no 'type'",
                hint="import a file written by `memoir export`",
            )
        yield number, record


def _field(record: dict[str, Any], name: str, kind: type, number: int) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InvalidInputError(
            f"line {number}: field {name!r} is missing or not {kind.__name__}",
            hint="import a file written by `memoir export`",
        )
    return value


async def import_jsonl(ctx: CoreContext, lines: Iterator[str], *, scope: Scope) -> ImportReport:
    """Read a ``memoir export`` stream into ``scope`` (see ``DocumentService.import_``).

    Raises:
        InvalidInputError: the stream is not a memoir export (names the line).
    """
    records = _records(lines)
    first = next(records, None)
    if first is None or first[1].get("type") != "header":
        raise InvalidInputError(
            "the import has no memoir export header", hint="import a file written by memoir export"
        )
    header = first[1]
    if header.get("format") != EXPORT_FORMAT:
        raise InvalidInputError(
            f"unsupported export format {header.get('format')!r}",
            hint=f"this memoir reads memoir-store/1 (what memoir export writes) and {EXPORT_FORMAT}",
        )
    same_embedder = (
        header.get("embedder") == ctx.embedder.embedder_id
        and header.get("dimension") == ctx.embedder.dimension
    )
    report = ImportReport(documents=0, chunks=0, reembedded=not same_embedder)
    if not same_embedder:
        report.warnings.append(
            f"the export was made with the embedder {header.get('embedder')!r}; its chunks were "
            f"re-embedded with {ctx.embedder.embedder_id!r}"
        )
    pending: tuple[NewDocument, list[NewItem], list[np.ndarray | None]] | None = None

    async def flush() -> None:
        nonlocal pending
        if pending is None:
            return
        doc, items, vectors = pending
        pending = None
        present = [v for v in vectors if v is not None]
        if same_embedder and len(present) == len(vectors):
            matrix = (
                np.vstack(present)
                if vectors
                else np.zeros((0, ctx.embedder.dimension), dtype=np.float32)
            )
        else:
            texts = [i.text for i in items]
            matrix = (
                await ctx.embedder.embed_documents(texts)
                if texts
                else np.zeros((0, ctx.embedder.dimension), dtype=np.float32)
            )
        _, removed = await ctx.store.write(
            lambda tx: persistence.replace_document(tx, doc, items, matrix)
        )
        if removed < 0:
            report.unchanged += 1
        report.documents += 1
        report.chunks += len(items)

    for number, record in records:
        kind = record["type"]
        if kind == "doc":
            await flush()
            tags = record.get("tags") or []
            pending = (
                NewDocument(
                    doc_id=_field(record, "id", str, number),
                    scope=scope,
                    path=_field(record, "path", str, number),
                    content_hash=_field(record, "hash", str, number),
                    mtime=record.get("mtime"),
                    size=int(record.get("size") or 0),
                    tags=tuple(str(t) for t in tags),
                    source=record.get("source"),
                ),
                [],
                [],
            )
        elif kind == "chunk":
            if pending is None or record.get("doc_id") != pending[0].doc_id:
                raise InvalidInputError(
                    f"line {number}: a chunk that does not follow its document",
                    hint="import a file written by `memoir export`",
                )
            doc = pending[0]
            text = _field(record, "text", str, number)
            offset = _field(record, "offset", int, number)
            end = record.get("end_offset")
            pending[1].append(
                NewItem(
                    uid=_field(record, "id", str, number),
                    kind=CHUNK_KIND,
                    text=text,
                    token_count=_field(record, "tokens", int, number),
                    scope=scope,
                    content_hash=content_hash(text),
                    start_offset=offset,
                    end_offset=int(end) if isinstance(end, int) else offset + len(text),
                    tags=doc.tags,
                )
            )
            encoded = record.get("embedding")
            vector = None
            if isinstance(encoded, str) and same_embedder:
                vector = np.frombuffer(base64.b64decode(encoded), dtype="<f4").astype(np.float32)
                if vector.shape[0] != ctx.embedder.dimension:
                    vector = None
            pending[2].append(vector)
        else:
            raise InvalidInputError(
                f"line {number}: unknown record type {kind!r}",
                hint="import a file written by `memoir export`",
            )
    await flush()
    return report
