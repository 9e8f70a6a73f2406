"""The output schemas of the MCP tools: compact, stable shapes the model reads as
``structuredContent``.

They are deliberately smaller than the core's result models: every field here is sent in the
``tools/list`` answer on every session, so only what an agent acts on is published (the core's
full score breakdowns stay available through the CLI and the Python API). Descriptions are kept
for the fields whose meaning is not obvious from the name.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CitationOut",
    "DetectContextOutput",
    "DocumentOutcome",
    "IngestOutput",
    "LayerScore",
    "QueryDirectivesOutput",
    "QueryOutput",
    "RetrievalCounts",
    "SourceRef",
    "UpsertOutput",
]

_OUT = ConfigDict(extra="forbid")


class CitationOut(BaseModel):
    """Where directive [ref] of the context block comes from."""

    model_config = _OUT

    ref: int
    source_path: str
    line_start: int | None = None
    line_end: int | None = None
    rule_id: str


class RetrievalCounts(BaseModel):
    model_config = _OUT

    searched: int
    considered: int
    selected: int


class QueryDiagnosticsOut(BaseModel):
    model_config = _OUT

    detected_layer: str | None
    topics: list[str]
    confidence: float
    retrieval_stats: RetrievalCounts
    token_budget: int
    tokens_used: int
    semantic_available: bool = Field(description="False: ranked lexically (model still loading).")
    execution_ms: float
    partial: bool = Field(False, description="True when the call timed out and this is partial.")
    warnings: list[str]


class QueryDirectivesOutput(BaseModel):
    model_config = _OUT

    context_block: str = Field(description="Markdown to prepend to your working context.")
    citations: list[CitationOut]
    diagnostics: QueryDiagnosticsOut


class LayerScore(BaseModel):
    model_config = _OUT

    layer: str
    confidence: float


class DetectContextOutput(BaseModel):
    model_config = _OUT

    detected_layer: str | None
    layer_candidates: list[LayerScore]
    topics: list[str]
    languages: list[str]
    frameworks: list[str]
    platforms: list[str]
    keywords: list[str] | None = None
    confidence: float
    warnings: list[str]


class DocumentOutcome(BaseModel):
    model_config = _OUT

    path: str
    status: str = Field(description="created, updated, unchanged or failed.")
    directives: int
    error: str | None = None


class UpsertOutput(BaseModel):
    model_config = _OUT

    rules_upserted: int
    sections_created: int
    directives_added: int
    patterns_extracted: int
    relations_established: int
    documents_processed: int
    documents_failed: int
    warnings: list[str]
    documents: list[DocumentOutcome]


class IngestOutput(BaseModel):
    model_config = _OUT

    engine: str = Field(description="hierarchy (category tree) or documents (search index).")
    stored: int = Field(description="Chunks or items written (0 when already known).")
    categories: list[str] = Field(description="Category paths the text was filed under.")
    model: str | None = Field(None, description="The model that classified it, if any.")
    warnings: list[str]


class SourceRef(BaseModel):
    model_config = _OUT

    ref: int
    source: str | None = None
    text: str = Field(description="The cited passage (may be shortened).")
    category: str | None = None


class QueryOutput(BaseModel):
    model_config = _OUT

    engine: str = Field(description="hierarchy (category tree) or documents (search index).")
    answer: str
    sources: list[SourceRef]
    tokens_used: int | None = None
    warnings: list[str]
    details: dict[str, Any] = Field(default_factory=dict, description="Strategy, timings, model.")
