"""Remove, stats, doctor and compact for the document side."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core.documents.discovery import normalise_virtual_path
from memory_core.documents.responses import DocumentChange, RemoveReport
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.models import DoctorFinding
from memory_core.storage.sqlite import documents as doc_sql

if TYPE_CHECKING:
    from memory_core.service import CoreContext

__all__ = [
    "compact",
    "doctor_findings",
    "findings_from_counts",
    "remove",
    "stats",
    "target_kind",
]


def target_kind(target: str) -> str:
    """The spec's disambiguation: a target with a path separator or naming an existing path
    is a path; anything else is a document id."""
    if "/" in target or "\\" in target or Path(target).exists():
        return "path"
    return "id"


async def remove(
    ctx: CoreContext, targets: Sequence[str], *, scope: str, purge: bool = False
) -> RemoveReport:
    """Tombstone the documents named by ``targets`` (see ``DocumentService.remove``).

    Raises:
        InvalidInputError: no targets.
        NotFoundError: no target matched any document (names them).
    """
    if not targets:
        raise InvalidInputError("nothing to remove", hint="pass document ids or paths")
    db = ctx.store.db  # type: ignore[attr-defined]
    report = RemoveReport()
    docs: dict[int, Any] = {}
    missing: list[str] = []
    for target in targets:
        if not target.strip():
            continue
        if target_kind(target) == "path":
            candidates = {normalise_virtual_path(target)}
            path = Path(target).expanduser()
            if path.exists() or path.is_absolute() or path.parent.exists():
                with contextlib.suppress(OSError, RuntimeError):
                    candidates.add(path.resolve().as_posix())
            paths = sorted(candidates)
            found = await db.read(
                lambda conn, c=paths: doc_sql.find_documents(conn, scope, paths=c)
            )
        else:
            found = await db.read(
                lambda conn, t=target: doc_sql.find_documents(conn, scope, doc_ids=[t])
            )
            if len({d.doc_id for d in found}) > 1 and not any(d.doc_id == target for d in found):
                raise InvalidInputError(
                    f"the id prefix {target!r} matches {len(found)} documents",
                    hint="use more characters of the id: " + ", ".join(d.doc_id for d in found[:5]),
                )
        if not found:
            missing.append(target)
        for doc in found:
            docs[doc.resource_id] = doc
    if not docs:
        raise NotFoundError(
            "no document matches " + ", ".join(repr(t) for t in missing[:5]),
            hint='list documents with `memoir query --rql "SELECT doc.id, doc.path FROM doc"`',
        )
    ordered = sorted(docs.values(), key=lambda d: (d.path, d.doc_id))
    await db.write(doc_sql.tombstone_documents, scope, [d.resource_id for d in ordered])
    report.removed = [
        DocumentChange(path=d.path, doc_id=d.doc_id, status="removed") for d in ordered
    ]
    report.warnings = [f"no document matches {t!r}" for t in missing]
    if purge:
        report.purged = await db.write(doc_sql.purge_tombstones, scope)
    return report


async def stats(ctx: CoreContext, *, scope: str | None) -> dict[str, Any]:
    """Document counts for ``scope`` (all scopes when None), the embedder and the store."""
    db = ctx.store.db  # type: ignore[attr-defined]
    counts = await db.read(doc_sql.document_counts, scope)
    store = (await ctx.store.stats()).as_dict()
    return {
        "scope": scope,
        "documents": counts,
        "embedding_model": ctx.embedder.embedder_id,
        "embedding_dim": ctx.embedder.dimension,
        "tokenizer": ctx.tokens.name,
        "chunking": {
            "chunk_tokens": ctx.settings.documents.chunk_tokens,
            "overlap_tokens": ctx.settings.documents.overlap_tokens,
        },
        "store": store,
    }


def findings_from_counts(counts: dict[str, int]) -> list[DoctorFinding]:
    """Doctor findings from ``storage.sqlite.documents.document_findings(conn)`` counts (pure,
    so ``diagnose_file`` can call it on its own connection)."""
    findings: list[DoctorFinding] = []

    def check(name: str, bad: int, message: str, fix: str, level: str = "error") -> None:
        if bad:
            findings.append(DoctorFinding(name, level, f"{bad} {message}", fix=fix))  # type: ignore[arg-type]
        else:
            findings.append(DoctorFinding(name, "ok", f"no {message}"))

    check(
        "documents.orphan_chunks",
        counts["chunks_without_document"],
        "chunks without a document",
        "run `memoir compact`, then re-add the affected files",
    )
    check(
        "documents.removed_chunks",
        counts["chunks_of_removed_documents"],
        "chunks of removed documents still indexed",
        "run `memoir compact`",
    )
    check(
        "documents.duplicate_paths",
        counts["duplicate_live_paths"],
        "paths with more than one live document",
        "run `memoir rm <path>` then `memoir add <path>`",
    )
    check(
        "documents.empty",
        counts["documents_without_chunks"],
        "non-empty documents without chunks",
        "re-add them with `memoir add <path>`",
        level="warning",
    )
    check(
        "documents.tombstones",
        counts["tombstoned_documents"],
        "removed documents waiting for compaction",
        "run `memoir compact` to reclaim the space",
        level="warning",
    )
    return findings


async def doctor_findings(ctx: CoreContext) -> list[DoctorFinding]:
    """Document-side checks, each with its fix."""
    db = ctx.store.db  # type: ignore[attr-defined]
    return findings_from_counts(await db.read(doc_sql.document_findings))


async def compact(ctx: CoreContext) -> dict[str, Any]:
    """Purge tombstones, optimise the lexical index, VACUUM; sizes before and after."""
    from memory_core.storage.sqlite.doc_maintenance import optimise_indexes, vacuum

    db = ctx.store.db  # type: ignore[attr-defined]
    before = (await ctx.store.stats()).file_bytes
    purged = await db.write(doc_sql.purge_tombstones, None)
    await db.write(optimise_indexes)
    # VACUUM cannot run inside a transaction: it runs on the reader in autocommit mode.
    await db.read(vacuum)
    after = (await ctx.store.stats()).file_bytes
    return {"purged": purged, "bytes_before": before, "bytes_after": after}
