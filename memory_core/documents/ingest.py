"""Ingest: text in, chunks with tokens, embeddings and index rows out, one transaction each.

The expensive work (reading, chunking, counting, embedding) happens before the write; the
write replaces the document's previous version in one transaction, so readers never see a
half-ingested document or a stale chunk. An unchanged document costs one hash and one lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import structlog

from memory_core.chunking import chunk_by_tokens
from memory_core.documents import persistence
from memory_core.documents.discovery import (
    discover,
    normalise_virtual_path,
    read_text_file,
)
from memory_core.documents.records import CHUNK_KIND, NewDocument
from memory_core.documents.responses import AddReport, DocumentChange
from memory_core.errors import InvalidInputError
from memory_core.models import NewItem, content_hash, stable_id, utc_now
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.context import CoreContext

__all__ = ["Progress", "add_paths", "add_text", "document_id", "prepare_chunks"]

log = structlog.get_logger(__name__)

Progress = Callable[[int, int, str], None]
_MAX_TAG_CHARS = 200


def document_id(scope: Scope, path: str, text_hash: str) -> str:
    """Stable id of a document: its scope, normalised path and content hash."""
    return stable_id("doc", scope.key, path, text_hash)


def _clean_tags(tags: Sequence[str]) -> tuple[str, ...]:
    cleaned: list[str] = []
    for tag in tags:
        for part in tag.split(","):
            value = part.strip()
            if not value:
                continue
            if len(value) > _MAX_TAG_CHARS or any(ord(c) < 32 for c in value):
                raise InvalidInputError(
                    f"invalid tag {value[:40]!r}",
                    hint=f"tags are short labels under {_MAX_TAG_CHARS} characters",
                )
            if value not in cleaned:
                cleaned.append(value)
    return tuple(cleaned)


def prepare_chunks(ctx: CoreContext, doc: NewDocument, text: str) -> list[NewItem]:
    """The chunk items of ``text`` for ``doc`` (ids from the document id and offset)."""
    settings = ctx.settings.documents
    pieces = chunk_by_tokens(
        text,
        chunk_tokens=settings.chunk_tokens,
        overlap_tokens=settings.overlap_tokens,
        count=ctx.tokens.count,
    )
    items: list[NewItem] = []
    line, cursor = 1, 0
    for piece in pieces:
        line += text.count("\n", cursor, piece.start)
        cursor = piece.start
        items.append(
            NewItem(
                uid=stable_id(doc.doc_id, piece.start),
                kind=CHUNK_KIND,
                text=piece.text,
                token_count=piece.tokens,
                scope=doc.scope,
                content_hash=content_hash(piece.text),
                start_offset=piece.start,
                end_offset=piece.end,
                start_line=line,
                end_line=line + piece.text.count("\n"),
                tags=doc.tags,
            )
        )
    return items


async def _embed(ctx: CoreContext, texts: list[str]) -> np.ndarray:
    batch = max(1, ctx.settings.embedding.batch_size)
    if not texts:
        return np.zeros((0, ctx.embedder.dimension), dtype=np.float32)
    parts = [
        await ctx.embedder.embed_documents(texts[i : i + batch])
        for i in range(0, len(texts), batch)
    ]
    return np.vstack(parts)


async def _write(
    ctx: CoreContext, doc: NewDocument, text: str, existed: bool, *, force: bool = False
) -> DocumentChange:
    chunks = prepare_chunks(ctx, doc, text)
    vectors = await _embed(ctx, [c.text for c in chunks])
    _, removed = await ctx.store.write(
        lambda tx: persistence.replace_document(tx, doc, chunks, vectors, force=force)
    )
    status = "unchanged" if removed < 0 else "updated" if existed else "added"
    return DocumentChange(
        path=doc.path,
        doc_id=doc.doc_id,
        status=status,
        chunks=len(chunks),
        tokens=sum(c.token_count for c in chunks),
    )


def _tally(report: AddReport, change: DocumentChange) -> None:
    report.documents.append(change)
    if change.status == "added":
        report.added += 1
        report.chunks += change.chunks
    elif change.status == "updated":
        report.updated += 1
        report.chunks += change.chunks
    elif change.status == "unchanged":
        report.unchanged += 1
    else:
        report.skipped += 1


async def add_paths(
    ctx: CoreContext,
    paths: Sequence[Path],
    *,
    scope: Scope,
    globs: Sequence[str] = (),
    ignores: Sequence[str] = (),
    tags: Sequence[str] = (),
    source: str | None = None,
    mtime_only: bool = False,
    progress: Progress | None = None,
) -> AddReport:
    """Ingest files and folders (see ``DocumentService.add_paths``)."""
    import time

    started = time.perf_counter()
    tag_tuple = _clean_tags(tags)
    files, warnings = discover(paths, globs=globs, ignores=ignores)
    report = AddReport(warnings=warnings)
    for index, file in enumerate(files):
        uri = file.path.as_posix()
        if progress:
            progress(index, len(files), uri)
        existing = await ctx.store.read(
            lambda tx, u=uri: persistence.live_document(tx, scope, u)  # type: ignore[misc]
        )
        if (
            mtime_only
            and existing is not None
            and existing.mtime == file.mtime
            and existing.size == file.size
        ):
            _tally(report, DocumentChange(path=uri, doc_id=existing.doc_id, status="unchanged"))
            continue
        read = read_text_file(file, max_bytes=ctx.settings.documents.max_file_bytes)
        if read.text is None:
            assert read.warning is not None
            report.warnings.append(read.warning)
            _tally(report, DocumentChange(path=uri, status="skipped", reason=read.warning))
            continue
        text_hash = content_hash(read.text)
        doc_id = document_id(scope, uri, text_hash)
        # Without --tag / --source a re-add keeps what the document had (a plain incremental
        # re-run must not strip labels).
        doc_tags = tag_tuple or (existing.tags if existing else ())
        doc_source = source if source is not None else (existing.source if existing else None)
        same_text = existing is not None and existing.doc_id == doc_id
        if (
            existing is not None
            and same_text
            and existing.tags == doc_tags
            and existing.source == doc_source
        ):
            if existing.mtime != file.mtime or existing.size != file.size:
                rid, mtime, size = existing.resource_id, file.mtime, file.size
                await ctx.store.write(
                    lambda tx: persistence.touch_document(tx, rid, mtime, size)  # noqa: B023
                )
            _tally(report, DocumentChange(path=uri, doc_id=doc_id, status="unchanged"))
            continue
        doc = NewDocument(
            doc_id=doc_id,
            scope=scope,
            path=uri,
            content_hash=text_hash,
            mtime=file.mtime,
            size=file.size,
            tags=doc_tags,
            source=doc_source,
        )
        # Same text with new tags or source is rewritten in place (force), keeping its ids.
        change = await _write(ctx, doc, read.text, existing is not None, force=same_text)
        _tally(report, change)
    if progress:
        progress(len(files), len(files), "")
    report.stats = {"took_ms": round((time.perf_counter() - started) * 1000, 1)}
    log.info(
        "documents added",
        added=report.added,
        updated=report.updated,
        unchanged=report.unchanged,
        skipped=report.skipped,
    )
    return report


async def add_text(
    ctx: CoreContext,
    text: str,
    *,
    path: str,
    scope: Scope,
    tags: Sequence[str] = (),
    source: str | None = None,
) -> AddReport:
    """Ingest ``text`` under the virtual ``path`` (see ``DocumentService.add_text``)."""
    if not text.strip():
        raise InvalidInputError("the text to add is empty", hint="pass some text with --text")
    size, limit = len(text.encode("utf-8")), ctx.settings.documents.max_file_bytes
    if size > limit:
        raise InvalidInputError(
            f"the text is {size:,} bytes, over documents.max_file_bytes ({limit:,})",
            hint="split it, or raise documents.max_file_bytes in memoir.toml "
            "(MEMOIR_DOCUMENTS__MAX_FILE_BYTES)",
            details={"bytes": size, "limit": limit, "setting": "documents.max_file_bytes"},
        )
    uri = normalise_virtual_path(path)
    tag_tuple = _clean_tags(tags)
    existing = await ctx.store.read(lambda tx: persistence.live_document(tx, scope, uri))
    text_hash = content_hash(text)
    doc_id = document_id(scope, uri, text_hash)
    report = AddReport()
    same_text = existing is not None and existing.doc_id == doc_id
    tag_tuple = tag_tuple or (existing.tags if existing else ())
    source = source if source is not None else (existing.source if existing else None)
    if (
        existing is not None
        and same_text
        and existing.tags == tag_tuple
        and existing.source == source
    ):
        _tally(report, DocumentChange(path=uri, doc_id=doc_id, status="unchanged"))
        return report
    doc = NewDocument(
        doc_id=doc_id,
        scope=scope,
        path=uri,
        content_hash=text_hash,
        mtime=utc_now()[:19] + "+00:00",
        size=len(text.encode("utf-8")),
        tags=tag_tuple,
        source=source,
    )
    _tally(report, await _write(ctx, doc, text, existing is not None, force=same_text))
    return report
