"""``DocumentService``: the document side of the facade (``memoir.documents``).

Recall's commands as methods: ingest files or text, remove, search, RQL, context, export,
import, stats, doctor, compact. Every read and write takes a ``scope``. Results are the
pydantic models of :mod:`memory_core.documents.responses`, shaped like the spec's JSON.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memory_core.documents import ingest, maintenance, querying, transfer
from memory_core.documents.responses import (
    AddReport,
    ExportReport,
    ImportReport,
    RemoveReport,
    SearchResponse,
)
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.input_limits import check_path_lengths
from memory_core.private_files import open_private_text
from memory_core.retrieval.engine import SearchMode
from memory_core.scope import Scope, ScopeLike, as_scope

if TYPE_CHECKING:
    from memory_core.context import CoreContext

__all__ = ["DocumentService"]


def _optional(scope: ScopeLike | None) -> Scope | None:
    return None if scope is None else as_scope(scope)


class DocumentService:
    """Documents and hybrid search over one open store (see the module docstring)."""

    def __init__(self, ctx: CoreContext) -> None:
        self._ctx = ctx

    async def add_paths(
        self,
        paths: Sequence[str | Path],
        *,
        scope: ScopeLike,
        globs: Sequence[str] = (),
        ignores: Sequence[str] = (),
        tags: Sequence[str] = (),
        source: str | None = None,
        mtime_only: bool = False,
        parser: str | None = None,
        progress: ingest.Progress | None = None,
    ) -> AddReport:
        """Ingest files and folders: UTF-8 text, chunked, embedded, indexed, one transaction
        per document. Unchanged files are skipped; changed files replace their chunks.

        Args:
            paths: files or folders.
            scope: the scope the documents belong to.
            globs: folder files must match one of these (relative, ``**`` allowed).
            ignores: folder files matching any of these are skipped.
            tags: labels for ``doc.tag`` filters (comma-separated values are split).
            source: free-text origin for ``doc.source`` filters.
            mtime_only: skip a file whose mtime and size match the stored document without
                reading it.
            parser: reserved (no-op in this version).
            progress: called as ``progress(done, total, path)``.

        Raises:
            InvalidInputError: no path exists, or a bad tag.
            PathNotAllowedError: a glob reaches outside its folder.
            LimitExceededError: a path longer than ``limits.path_chars``.
        """
        check_path_lengths(paths, self._ctx.settings.limits.path_chars)
        report = await ingest.add_paths(
            self._ctx,
            [Path(p) for p in paths],
            scope=as_scope(scope),
            globs=globs,
            ignores=ignores,
            tags=tags,
            source=source,
            mtime_only=mtime_only,
            progress=progress,
        )
        if parser:
            report.warnings.append(f"--parser {parser!r} is reserved and has no effect yet")
        return report

    async def add_text(
        self,
        text: str,
        *,
        path: str,
        scope: ScopeLike,
        tags: Sequence[str] = (),
        source: str | None = None,
    ) -> AddReport:
        """Ingest ``text`` as the document at the virtual ``path``.

        Raises:
            InvalidInputError: empty text, too large, or a bad path or tag.
        """
        return await ingest.add_text(
            self._ctx, text, path=path, scope=as_scope(scope), tags=tags, source=source
        )

    async def remove(
        self, targets: Sequence[str], *, scope: ScopeLike, purge: bool = False
    ) -> RemoveReport:
        """Remove documents by id (or unique id prefix) or path (a folder removes all under it).

        Chunks leave the indexes at once; the documents stay tombstoned until ``compact`` or
        ``purge=True``.

        Raises:
            NotFoundError: nothing matched.
            InvalidInputError: an ambiguous id prefix.
        """
        return await maintenance.remove(self._ctx, targets, scope=as_scope(scope), purge=purge)

    async def search(
        self,
        query: str,
        *,
        scope: ScopeLike,
        k: int | None = None,
        mode: SearchMode = "hybrid",
        filter: str | None = None,
        explain: bool = False,
    ) -> SearchResponse:
        """Top-k chunks for ``query``: hybrid (default), lexical or semantic, filtered by FEL.

        Raises:
            InvalidInputError: an empty query or k out of range.
            QuerySyntaxError: a malformed filter (with line and column).
        """
        return await querying.run_search(
            self._ctx, query, scope=as_scope(scope), k=k, mode=mode, filter=filter, explain=explain
        )

    async def query_rql(
        self, rql: str, *, scope: ScopeLike, explain: bool = False
    ) -> SearchResponse:
        """Execute one RQL statement.

        Raises:
            QuerySyntaxError: the statement does not parse (with line and column).
        """
        return await querying.run_rql(self._ctx, rql, scope=as_scope(scope), explain=explain)

    async def context(
        self,
        query: str,
        *,
        scope: ScopeLike,
        budget_tokens: int,
        diversity: int | None = None,
        k: int | None = None,
        mode: SearchMode = "hybrid",
        filter: str | None = None,
    ) -> SearchResponse:
        """A deterministic context window for ``query`` that never exceeds ``budget_tokens``.

        Raises:
            InvalidInputError: an empty query.
            BudgetError: a negative budget or diversity.
        """
        return await querying.run_context(
            self._ctx,
            query,
            scope=as_scope(scope),
            budget_tokens=budget_tokens,
            diversity=diversity,
            k=k,
            mode=mode,
            filter=filter,
        )

    async def export(self, out: IO[str] | str | Path, *, scope: ScopeLike | None) -> ExportReport:
        """Write documents and chunks (with vectors) as JSONL to a stream or a file path."""
        # Exports leave the store: private (0600), like the store itself.
        if isinstance(out, str | Path):
            path = Path(out)
            with open_private_text(path) as handle:
                report = await transfer.export_jsonl(self._ctx, handle, scope=_optional(scope))
            report.out = str(path)
            return report
        return await transfer.export_jsonl(self._ctx, out, scope=_optional(scope))

    async def import_(
        self, source: IO[str] | Iterable[str] | str | Path, *, scope: ScopeLike
    ) -> ImportReport:
        """Import a ``memoir export`` file (path) or stream of lines into ``scope``.

        Raises:
            NotFoundError: the file does not exist.
            InvalidInputError: it is not a memoir export.
        """
        if isinstance(source, str | Path):
            path = Path(source)
            if not path.is_file():
                raise NotFoundError(f"no file {path}", hint="pass a file written by memoir export")
            with contextlib.ExitStack() as stack:
                try:
                    handle = stack.enter_context(path.open(encoding="utf-8"))
                    return await transfer.import_jsonl(
                        self._ctx, iter(handle), scope=as_scope(scope)
                    )
                except UnicodeDecodeError as exc:
                    raise InvalidInputError(
                        f"{path} is not UTF-8 text", hint="pass a file written by memoir export"
                    ) from exc
        return await transfer.import_jsonl(self._ctx, iter(source), scope=as_scope(scope))

    async def stats(self, *, scope: ScopeLike | None = None) -> dict[str, Any]:
        """Document and chunk counts, tokens, embedder, chunking and store statistics."""
        return await maintenance.stats(self._ctx, scope=_optional(scope))

    async def compact(self) -> dict[str, Any]:
        """Purge tombstones, optimise the indexes and VACUUM the file."""
        return await maintenance.compact(self._ctx)
