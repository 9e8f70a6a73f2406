"""Remove, stats, doctor and compact for the document side."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core.documents import persistence
from memory_core.documents.discovery import normalise_virtual_path
from memory_core.documents.records import CHUNK_KIND, DOC_KIND
from memory_core.documents.responses import DocumentChange, RemoveReport
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.scope import Scope

if TYPE_CHECKING:
    from memory_core.context import CoreContext

__all__ = ["compact", "remove", "stats", "target_kind"]


def target_kind(target: str) -> str:
    """The spec's disambiguation: a target with a path separator or naming an existing path
    is a path; anything else is a document id."""
    if "/" in target or "\\" in target or Path(target).exists():
        return "path"
    return "id"


async def remove(
    ctx: CoreContext, targets: Sequence[str], *, scope: Scope, purge: bool = False
) -> RemoveReport:
    """Tombstone the documents named by ``targets`` (see ``DocumentService.remove``).

    Raises:
        InvalidInputError: no targets.
        NotFoundError: no target matched any document (names them).
    """
    if not targets:
        raise InvalidInputError("nothing to remove", hint="pass document ids or paths")
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
            found = await ctx.store.read(
                lambda tx, c=paths: persistence.find_documents(tx, scope, paths=c)  # type: ignore[misc]
            )
        else:
            found = await ctx.store.read(
                lambda tx, t=target: persistence.find_documents(tx, scope, doc_ids=[t])  # type: ignore[misc]
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
    ids = [d.resource_id for d in ordered]
    await ctx.store.write(lambda tx: persistence.tombstone_documents(tx, scope, ids))
    report.removed = [
        DocumentChange(path=d.path, doc_id=d.doc_id, status="removed") for d in ordered
    ]
    report.warnings = [f"no document matches {t!r}" for t in missing]
    if purge:
        report.purged = await ctx.store.write(lambda tx: persistence.purge_tombstones(tx, scope))
    return report


async def stats(ctx: CoreContext, *, scope: Scope | None) -> dict[str, Any]:
    """Document counts for ``scope`` (all scopes when None), the embedder and the store."""

    def counts(tx: Any) -> dict[str, Any]:
        docs = tx.resources.totals(scope, kinds=[DOC_KIND])
        chunks = tx.items.totals(scope, kinds=[CHUNK_KIND])
        return {
            "documents": docs.live,
            "chunks": chunks.items,
            "tokens": chunks.tokens,
            "bytes": docs.bytes,
            "tombstoned_documents": docs.deleted,
            "snapshot": docs.newest_mtime or "",
        }

    store = (await ctx.store.stats()).as_dict()
    return {
        "scope": scope.key if scope is not None else None,
        "documents": await ctx.store.read(counts),
        "embedding_model": ctx.embedder.embedder_id,
        "embedding_dim": ctx.embedder.dimension,
        "tokenizer": ctx.tokens.name,
        "chunking": {
            "chunk_tokens": ctx.settings.documents.chunk_tokens,
            "overlap_tokens": ctx.settings.documents.overlap_tokens,
        },
        "store": store,
    }


async def compact(ctx: CoreContext) -> dict[str, Any]:
    """Purge tombstones, optimise the lexical index, reclaim space; sizes before and after."""
    purged = await ctx.store.write(lambda tx: persistence.purge_tombstones(tx, None))
    sizes = await ctx.store.compact()
    return {
        "purged": purged,
        "bytes_before": sizes.get("file_bytes_before"),
        "bytes_after": sizes.get("file_bytes_after"),
    }
