"""Core results → tool outputs, and their compact text renderings (pure functions).

The text is what most clients put in front of the model, so it carries the substance (the
context block itself, the counts, the warnings) in as few tokens as possible; the full values
travel as ``structuredContent``.
"""

from __future__ import annotations

from typing import Any

from server.mcp_app.schemas import (
    CitationOut,
    DetectContextOutput,
    DocumentOutcome,
    IngestOutput,
    LayerScore,
    QueryDiagnosticsOut,
    QueryDirectivesOutput,
    QueryOutput,
    RetrievalCounts,
    SourceRef,
    UpsertOutput,
)

__all__ = [
    "detect_output",
    "detect_text",
    "directives_output",
    "directives_text",
    "ingest_output_from_hierarchy",
    "ingest_text",
    "partial_directives_output",
    "query_output_from_documents",
    "query_output_from_hierarchy",
    "query_text",
    "upsert_output",
    "upsert_text",
]

_MAX_SOURCE_CHARS = 600


def directives_output(
    result: Any, *, extra_warnings: list[str] | None = None
) -> QueryDirectivesOutput:
    """Shape a core ``DirectiveQueryResult``."""
    diag = result.diagnostics
    stats = diag.retrieval_stats
    warnings = list(diag.warnings) + [w for w in extra_warnings or () if w not in diag.warnings]
    return QueryDirectivesOutput(
        context_block=result.context_block,
        citations=[
            CitationOut(
                ref=c.ref,
                source_path=c.source_path,
                line_start=c.line_start,
                line_end=c.line_end,
                rule_id=c.rule_id,
            )
            for c in result.citations
        ],
        diagnostics=QueryDiagnosticsOut(
            detected_layer=diag.detected_layer,
            topics=list(diag.topics),
            confidence=diag.confidence,
            retrieval_stats=RetrievalCounts(
                searched=stats.searched, considered=stats.considered, selected=stats.selected
            ),
            token_budget=diag.token_budget,
            tokens_used=diag.tokens_used,
            semantic_available=diag.semantic_available,
            execution_ms=diag.execution_ms,
            partial=False,
            warnings=warnings,
        ),
    )


def partial_directives_output(
    detected: Any, *, timeout_s: float, token_budget: int, execution_ms: float
) -> QueryDirectivesOutput:
    """What query_directives answers when it ran out of time: the detected context and a warning
    telling the agent to fall back to its core rules (Requirements 9.3, 11.6)."""
    warning = (
        f"timed out after {timeout_s:g} s: no directives were selected; follow your core rules "
        "(validation, security, maintainability) and call query_directives again"
    )
    layer = detected.detected_layer if detected is not None else None
    topics = list(detected.topics) if detected is not None else []
    block = (
        "## Project directives (partial)\n\n"
        f"> WARNING: {warning}.\n\n"
        f"Detected layer: {layer or 'unknown'}; topics: {', '.join(topics) or 'none'}.\n"
    )
    return QueryDirectivesOutput(
        context_block=block,
        citations=[],
        diagnostics=QueryDiagnosticsOut(
            detected_layer=layer,
            topics=topics,
            confidence=detected.confidence if detected is not None else 0.0,
            retrieval_stats=RetrievalCounts(searched=0, considered=0, selected=0),
            token_budget=token_budget,
            tokens_used=0,
            semantic_available=False,
            execution_ms=execution_ms,
            partial=True,
            warnings=[warning],
        ),
    )


def directives_text(out: QueryDirectivesOutput) -> str:
    d = out.diagnostics
    s = d.retrieval_stats
    footer = (
        f"[memoir: layer {d.detected_layer or '?'}; topics {', '.join(d.topics) or '-'}; "
        f"confidence {d.confidence:.2f}; {s.selected} of {s.considered} candidates "
        f"({s.searched} directives); {d.tokens_used}/{d.token_budget} tokens; "
        f"{d.execution_ms:.0f} ms]"
    )
    lines = [out.context_block.rstrip(), "", footer]
    lines += [f"WARNING: {w}" for w in d.warnings]
    return "\n".join(lines)


def detect_output(detected: Any) -> DetectContextOutput:
    """Shape a core ``DetectedContext``."""
    return DetectContextOutput(
        detected_layer=detected.detected_layer,
        layer_candidates=[
            LayerScore(layer=c.layer, confidence=round(c.confidence, 3))
            for c in detected.layer_candidates
        ],
        topics=list(detected.topics),
        languages=list(detected.languages),
        frameworks=list(detected.frameworks),
        platforms=list(detected.platforms),
        keywords=list(detected.keywords) if detected.keywords is not None else None,
        confidence=detected.confidence,
        warnings=list(detected.warnings),
    )


def detect_text(out: DetectContextOutput) -> str:
    candidates = ", ".join(f"{c.layer} {c.confidence:.2f}" for c in out.layer_candidates)
    tech = out.languages + out.frameworks + out.platforms
    lines = [
        f"layer: {out.detected_layer or 'unknown'}"
        + (f" (candidates: {candidates})" if candidates else ""),
        f"topics: {', '.join(out.topics) or '-'}",
        f"technologies: {', '.join(tech) or '-'}",
        f"confidence: {out.confidence:.2f}",
    ]
    if out.keywords is not None:
        lines.append(f"keywords: {', '.join(out.keywords) or '-'}")
    lines += [f"WARNING: {w}" for w in out.warnings]
    return "\n".join(lines)


def upsert_output(report: Any) -> UpsertOutput:
    """Shape a core ``UpsertReport``."""
    return UpsertOutput(
        rules_upserted=report.rules_upserted,
        sections_created=report.sections_created,
        directives_added=report.directives_added,
        patterns_extracted=report.patterns_extracted,
        relations_established=report.relations_established,
        documents_processed=report.documents_processed,
        documents_failed=report.documents_failed,
        warnings=list(report.warnings),
        documents=[
            DocumentOutcome(path=d.path, status=d.status, directives=d.directives, error=d.error)
            for d in report.documents
        ],
    )


def upsert_text(out: UpsertOutput) -> str:
    lines = [
        f"Processed {out.documents_processed} document(s), {out.documents_failed} failed: "
        f"{out.rules_upserted} rule(s) upserted, {out.directives_added} directive(s) added, "
        f"{out.sections_created} section(s), {out.patterns_extracted} pattern(s), "
        f"{out.relations_established} relation(s)."
    ]
    lines += [f"- {d.path}: {d.status} ({d.directives} directives)" for d in out.documents]
    lines += [f"  error: {d.error}" for d in out.documents if d.error]
    if out.warnings:
        lines.append("Warnings:")
        lines += [f"- {w}" for w in out.warnings[:50]]
        if len(out.warnings) > 50:
            lines.append(f"- … {len(out.warnings) - 50} more in structuredContent")
    return "\n".join(lines)


def _models_used(model_used: dict[str, list[str]]) -> str | None:
    names = sorted({name for names in model_used.values() for name in names})
    return ", ".join(names) or None


def ingest_output_from_hierarchy(result: Any) -> IngestOutput:
    """Shape the hierarchy core's ``IngestResult`` (status ``ok``)."""
    return IngestOutput(
        engine="hierarchy",
        stored=result.stream.new_chunks
        if result.stream is not None
        else sum(1 for c in result.chunks if not c.already_stored),
        categories=sorted({c.category_path for c in result.chunks}),
        model=_models_used(result.model_used),
        warnings=list(result.warnings),
    )


def ingest_text(out: IngestOutput) -> str:
    where = f" under {'; '.join(out.categories)}" if out.categories else ""
    text = f"Stored {out.stored} new chunk(s){where} ({out.engine} engine"
    text += f", classified by {out.model})" if out.model else ")"
    return "\n".join([text + ".", *(f"WARNING: {w}" for w in out.warnings)])


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_SOURCE_CHARS else text[: _MAX_SOURCE_CHARS - 1] + "…"


def query_output_from_hierarchy(result: Any) -> QueryOutput:
    """Shape the hierarchy core's ``QueryResult`` (status ``ok``)."""
    sources = [
        SourceRef(
            ref=i,
            source=c.source or c.chunk_id,  # what ingest was told, else the chunk's id
            text=_short(c.text_content),
            category=c.category_path,
        )
        for i, c in enumerate(result.used_chunks, start=1)
    ]
    return QueryOutput(
        engine="hierarchy",
        answer=result.answer or "",
        sources=sources,
        tokens_used=sum(c.token_count for c in result.used_chunks),
        warnings=list(result.warnings),
        details={
            "strategy": result.strategy,
            "summarized": result.summarized,
            "explored_paths": len(result.explored_paths),
            "dropped_paths": len(result.dropped_paths),
            "llm_calls": sum(result.llm_calls.values()),
            "model": _models_used(result.model_used),
            "latency_s": round(result.total_latency, 3),
        },
    )


def query_output_from_documents(response: Any) -> QueryOutput:
    """Shape the documents engine's ``SearchResponse`` (used when the hierarchy is not built in)."""
    sources = [
        SourceRef(
            ref=i,
            source=r.doc.path if r.doc is not None else None,
            text=_short(r.chunk.text or "") if r.chunk is not None else "",
        )
        for i, r in enumerate(response.results or [], start=1)
    ]
    answer = "\n\n".join(f"[{s.ref}] {s.text}" for s in sources)
    return QueryOutput(
        engine="documents",
        answer=answer or "No stored knowledge matches this question.",
        sources=sources,
        tokens_used=None,
        warnings=list(response.warnings),
        details={},
    )


def query_text(out: QueryOutput) -> str:
    lines = [out.answer.rstrip()]
    if out.sources and out.engine == "hierarchy":
        lines.append("")
        lines += [f"[{s.ref}] {s.category or '-'} ({s.source})" for s in out.sources]
    lines += [f"WARNING: {w}" for w in out.warnings]
    return "\n".join(lines)
