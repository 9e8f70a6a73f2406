"""Rule ingestion: read and parse files, plan the graph writes, embed, write in batches.

The read side (:func:`read_rule_files`) is blocking file work for a worker thread; the write
side (:func:`ingest_loaded`) embeds new directives once and writes documents in transactions
of a few hundred directives.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from memory_core.errors import EmbeddingError, MemoirError
from memory_core.rules.graph import DocumentPlan, build_plan
from memory_core.rules.models import DocumentReport, UpsertIssue, UpsertReport
from memory_core.rules.paths import display_path, resolve_allowed
from memory_core.rules.persistence import document_state, learned_terms, upsert_documents
from memory_core.rules.topics import TopicNormalizer
from memory_core.scope import Scope

__all__ = ["BATCH_DIRECTIVES", "Skipped", "ingest_loaded", "read_rule_files"]


class Skipped(str):
    """Why a file met during a folder walk was not ingested (reported, never silent)."""


# Documents are written in transactions of about this many directives: one commit per file
# made bulk ingest slow, one for everything would hold the write lock for too long.
BATCH_DIRECTIVES = 400


def _log() -> Any:
    # A fresh lazy proxy per call: entry points may configure structlog after import.
    return structlog.get_logger("memory_core.rules.service")


def _batches(plans: Sequence[DocumentPlan], size: int) -> list[list[DocumentPlan]]:
    batches: list[list[DocumentPlan]] = []
    current: list[DocumentPlan] = []
    count = 0
    for plan in plans:
        if current and count + len(plan.directives) > size:
            batches.append(current)
            current, count = [], 0
        current.append(plan)
        count += len(plan.directives)
    if current:
        batches.append(current)
    return batches


def read_rule_files(
    paths: Sequence[str],
    roots: Sequence[Path],
    *,
    cwd: Path,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> list[tuple[str, Any]]:
    """Resolve, walk and parse rule files (blocking: run it in a worker thread).

    Args:
        paths: files or folders.
        roots: folders they must resolve into.
        cwd: base of relative paths.
        include: glob patterns of files a folder walk takes whatever they are.
        exclude: glob patterns of files a folder walk leaves out.

    Returns:
        (recorded path, ``ParseResult`` | ``MemoirError`` | ``Skipped``) per file, in order;
        problems are values, so one bad path never stops the others.
    """
    from rules_parser import discover, load

    loaded: list[tuple[str, Any]] = []
    for raw in paths:
        try:
            resolved, _root = resolve_allowed(raw, roots, cwd=cwd)
        except MemoirError as exc:
            loaded.append((str(raw), exc))
            continue
        if resolved.is_dir():
            found = discover(resolved, include=include, exclude=exclude)
            files = found.files
            for skipped, reason in found.skipped:
                try:
                    real, file_root = resolve_allowed(skipped, roots, cwd=cwd)
                    shown = display_path(real, file_root)
                except MemoirError:
                    shown = str(skipped)
                loaded.append((shown, Skipped(reason)))
        else:
            files = [resolved]
        for file in files:
            try:
                real, file_root = resolve_allowed(file, roots, cwd=cwd)
            except MemoirError as exc:
                loaded.append((str(file), exc))
                continue
            shown = display_path(real, file_root)
            loaded.append((shown, load(real, display_path=shown)))
    return loaded


async def ingest_loaded(
    ctx: Any, loaded: list[tuple[str, Any]], *, scope: Scope, overwrite: bool, started: float
) -> UpsertReport:
    """Plan, embed and write parsed documents; report statistics (Requirement 7.4).

    Unchanged documents (same content hash, same parser version) cost one read and no
    embedding. New and changed
    directives are embedded in one batch; documents are written in transactions of about
    ``BATCH_DIRECTIVES`` directives. Embedding failures keep the directives, without vectors.
    """
    store = ctx.store
    known_topics, _ = await store.read(lambda tx: learned_terms(tx, scope))
    normalizer = TopicNormalizer(known_topics)
    warnings: list[str] = []
    issues: list[UpsertIssue] = []
    documents: list[DocumentReport] = []
    plans: list[DocumentPlan] = []
    secrets_flagged = 0
    for shown, result in loaded:
        if isinstance(result, Skipped):
            warnings.append(f"{shown}: skipped: {result}")
            documents.append(DocumentReport(path=shown, status="skipped", error=str(result)))
            continue
        if isinstance(result, MemoirError):
            warnings.append(f"{shown}: error: {result.message}")
            documents.append(DocumentReport(path=shown, status="failed", error=result.message))
            continue
        for issue in result.issues:
            issues.append(
                UpsertIssue(
                    path=issue.path,
                    line=issue.line,
                    field=issue.field,
                    message=issue.message,
                    severity=issue.severity,
                )
            )
            if issue.field == "secret":
                secrets_flagged += 1
                warnings.append(f"SECURITY: {issue}")
            else:
                warnings.append(str(issue))
        document = result.document
        if document is None:
            error = "; ".join(i.message for i in result.errors) or "nothing could be parsed"
            documents.append(DocumentReport(path=shown, status="failed", error=error))
            continue
        if not document.directives:
            warnings.append(f"{shown}: warning: no directives found; document skipped")
            documents.append(DocumentReport(path=shown, status="skipped", format=document.format))
            continue
        plans.append(
            build_plan(document, scope=scope, uri=shown, tokens=ctx.tokens, topics=normalizer)
        )

    stored = await store.read(lambda tx: [document_state(tx, p) for p in plans])
    to_embed: list[tuple[str, str]] = []
    for plan, (current, uids) in zip(plans, stored, strict=True):
        if current and not overwrite:
            continue
        to_embed += [(d.item.uid, d.embed_text) for d in plan.directives if d.item.uid not in uids]
    vectors: dict[str, np.ndarray] = {}
    if to_embed:
        try:
            matrix = await ctx.embedder.embed_documents([t for _, t in to_embed])
            vectors = {uid: matrix[i] for i, (uid, _) in enumerate(to_embed)}
        except EmbeddingError as exc:
            # Requirement 11.2: keep the directives, searchable by keywords.
            warnings.append(
                f"embeddings failed ({exc.message}); directives stored without vectors, "
                "keyword matching only until `memoir reembed`"
            )

    totals = dict.fromkeys(
        (
            "rules_upserted",
            "sections_created",
            "directives_added",
            "directives_removed",
            "directives_unchanged",
            "relations_established",
        ),
        0,
    )
    patterns = 0
    for batch in _batches(plans, BATCH_DIRECTIVES):
        writes = await store.write(
            lambda tx, batch=batch: upsert_documents(tx, batch, vectors, overwrite)
        )
        for plan, written in zip(batch, writes, strict=True):
            for key in totals:
                totals[key] += getattr(written, key)
            if written.status != "unchanged":
                patterns += plan.pattern_count
            documents.append(
                DocumentReport(
                    path=plan.uri,
                    status=written.status,  # type: ignore[arg-type]
                    rule_id=plan.rule_id,
                    format=plan.resource_metadata.get("format"),
                    directives=written.directives_total,
                )
            )
    failed = sum(1 for d in documents if d.status == "failed")
    took = round((time.perf_counter() - started) * 1000, 2)
    report = UpsertReport(
        **totals,
        patterns_extracted=patterns,
        documents_processed=len(documents),
        documents_failed=failed,
        warnings=warnings,
        issues=issues,
        documents=documents,
        took_ms=took,
    )
    # Requirement 12.3 / 13.1: counts only, never document text.
    _log().info(
        "rules upserted",
        scope=scope.key,
        documents=len(documents),
        succeeded=len(documents) - failed,
        failed=failed,
        warnings=len(warnings),
        secrets_flagged=secrets_flagged,
        directives_added=totals["directives_added"],
        directives_removed=totals["directives_removed"],
        took_ms=took,
    )
    if secrets_flagged:
        _log().warning("possible secrets in rule documents", scope=scope.key, count=secrets_flagged)
    return report
