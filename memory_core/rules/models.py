"""Result types of the rules feature: what the CLI prints and the MCP tools return.

Every value is a pydantic model with field descriptions, so the MCP server can publish them
as output schemas unchanged. Field names are snake_case and every value is JSON-friendly.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rules_parser.polarity import directive_marker

__all__ = [
    "Citation",
    "DetectedContext",
    "DirectiveDetail",
    "DirectiveQueryResult",
    "DocumentReport",
    "LayerCandidate",
    "QueryDiagnostics",
    "QueryRun",
    "RankedDirective",
    "RemoveReport",
    "RetrievalStats",
    "RuleDetail",
    "RuleSummary",
    "ScoreBreakdown",
    "UpsertIssue",
    "UpsertReport",
]

_MODEL = ConfigDict(frozen=True, extra="forbid")


class UpsertIssue(BaseModel):
    """A validation error or warning found in a rule document, located by line and field."""

    model_config = _MODEL

    path: str = Field(description="The document the issue is in.")
    line: int = Field(description="1-based line of the problem.")
    field: str | None = Field(default=None, description="The metadata field or element concerned.")
    message: str = Field(description="What is wrong and how to fix it.")
    severity: Literal["error", "warning"] = Field(description="error or warning.")


class DocumentReport(BaseModel):
    """What happened to one document during an upsert."""

    model_config = _MODEL

    path: str = Field(description="The document path as recorded (relative to its root).")
    status: Literal["created", "updated", "unchanged", "skipped", "failed"] = Field(
        description="created / updated / unchanged (same content hash) / skipped (no "
        "directives) / failed (unreadable, outside the allowed roots, or unparsable)."
    )
    rule_id: str | None = Field(default=None, description="Id of the rule the document defines.")
    format: str | None = Field(default=None, description="Detected source format.")
    directives: int = Field(default=0, description="Directives the document holds now.")
    error: str | None = Field(default=None, description="Why the document failed, if it did.")


class UpsertReport(BaseModel):
    """Statistics of an upsert (Requirement 7.4) plus per-document outcomes."""

    model_config = _MODEL

    rules_upserted: int = Field(description="Rules created or updated.")
    sections_created: int = Field(description="Section nodes created.")
    directives_added: int = Field(description="Directives inserted (new or changed).")
    directives_removed: int = Field(
        default=0, description="Directives deleted (gone from the source)."
    )
    directives_unchanged: int = Field(default=0, description="Directives kept as they were.")
    patterns_extracted: int = Field(description="Code patterns (examples, anti-patterns) found.")
    relations_established: int = Field(description="Graph edges created.")
    documents_processed: int = Field(description="Documents looked at.")
    documents_failed: int = Field(description="Documents that could not be ingested.")
    warnings: list[str] = Field(
        default_factory=list, description="Warnings and validation errors, one line each."
    )
    issues: list[UpsertIssue] = Field(
        default_factory=list, description="The same problems, structured."
    )
    documents: list[DocumentReport] = Field(default_factory=list, description="Per document.")
    took_ms: float = Field(default=0.0, description="Wall time of the whole upsert.")


class LayerCandidate(BaseModel):
    """One possible architectural layer for a task."""

    model_config = _MODEL

    layer: str = Field(description="1-Presentation … 7-Deployment.")
    confidence: float = Field(ge=0, le=1, description="Share of the layer evidence, 0..1.")
    matched: list[str] = Field(default_factory=list, description="Words that pointed here.")


class DetectedContext(BaseModel):
    """What a task is about: layer, topics, technologies (Requirements 2 and 6)."""

    model_config = _MODEL

    detected_layer: str | None = Field(
        description="The most likely layer, or None when nothing points to one."
    )
    layer_candidates: list[LayerCandidate] = Field(
        default_factory=list, description="Every layer with evidence, best first."
    )
    topics: list[str] = Field(default_factory=list, description="Detected topics, best first.")
    languages: list[str] = Field(default_factory=list, description="Programming languages.")
    frameworks: list[str] = Field(default_factory=list, description="Frameworks and libraries.")
    platforms: list[str] = Field(default_factory=list, description="Cloud and runtime platforms.")
    keywords: list[str] | None = Field(
        None, description="Action words and domain terms (only when asked for)."
    )
    confidence: float = Field(ge=0, le=1, description="Overall detection confidence, 0..1.")
    warnings: list[str] = Field(default_factory=list, description="Low-confidence warnings.")


class ScoreBreakdown(BaseModel):
    """Why a directive ranked where it did: each signal (0..1, severity 1..3) and its weight."""

    model_config = _MODEL

    authority: float = Field(description="1 when the rule is authoritative for a detected topic.")
    when_to_apply: float = Field(description="How well a When-to-Apply condition matches, 0..1.")
    layer_match: float = Field(description="1 for the detected layer or the wildcard layer.")
    topic_overlap: float = Field(description="Jaccard similarity of directive and task topics.")
    severity_boost: float = Field(description="MUST=3, SHOULD=2, MAY=1.")
    semantic_sim: float = Field(description="Cosine similarity of task and directive embeddings.")
    weights: dict[str, float] = Field(description="The weight applied to each signal.")
    relevance: float = Field(
        default=0.0,
        description="Task-specific evidence (similarity, lexical rank, conditions, authority, "
        "topics) that gated the directive into the block; weighted into the total.",
    )
    total: float = Field(description="Sum of signal × weight, plus relevance × its weight.")
    reasons: list[str] = Field(default_factory=list, description="Human-readable explanation.")


class RankedDirective(BaseModel):
    """A selected directive with its provenance and score."""

    model_config = _MODEL

    directive_id: str = Field(description="Stable id of the directive.")
    rule_id: str = Field(description="Id of its rule.")
    rule_title: str | None = Field(default=None, description="Title of its rule.")
    text: str = Field(description="The directive statement.")
    severity: Literal["MUST", "SHOULD", "MAY"] = Field(description="MUST, SHOULD or MAY.")
    polarity: Literal["do", "dont", "ask"] = Field(
        default="do",
        description="do: an instruction; dont: a prohibition (never do what the text says); "
        "ask: ask the user before doing it.",
    )
    layer: str | None = Field(default=None, description="Layer the directive applies to.")
    topics: list[str] = Field(default_factory=list, description="Topics of the directive.")
    source_path: str = Field(description="Rule document the directive comes from.")
    line_start: int | None = Field(default=None, description="First line in the source.")
    line_end: int | None = Field(default=None, description="Last line in the source.")
    section: list[str] = Field(default_factory=list, description="Heading breadcrumb.")
    score: float = Field(description="Total score.")
    breakdown: ScoreBreakdown = Field(description="How the score was made.")
    matched_by: list[Literal["lexical", "semantic", "graph"]] = Field(
        default_factory=list, description="Which retrieval arms found it."
    )
    forced: bool = Field(
        default=False, description="Included as a top MUST regardless of the budget."
    )
    reason: str = Field(
        default="", description="Why it was chosen for this task, in a few words (rendered)."
    )
    ref: int | None = Field(default=None, description="Its [n] marker in the context block.")


class Citation(BaseModel):
    """Where a directive in the context block comes from."""

    model_config = _MODEL

    ref: int = Field(description="The [n] marker used in the context block.")
    source_path: str = Field(description="Rule document path.")
    line_start: int | None = Field(default=None, description="First line (1-based).")
    line_end: int | None = Field(default=None, description="Last line (inclusive).")
    rule_id: str = Field(description="Id of the rule.")
    directive_id: str = Field(description="Id of the directive.")
    section: list[str] = Field(default_factory=list, description="Heading breadcrumb.")


class RetrievalStats(BaseModel):
    """How many directives were searched, considered and selected (Requirement 5.7)."""

    model_config = _MODEL

    searched: int = Field(description="Directives in the knowledge graph of this scope.")
    considered: int = Field(description="Candidates scored.")
    selected: int = Field(description="Directives in the context block.")
    lexical_hits: int = Field(default=0, description="Candidates from the lexical arm.")
    semantic_hits: int = Field(default=0, description="Candidates from the semantic arm.")
    graph_hits: int = Field(default=0, description="Candidates from graph expansion.")
    dropped_for_budget: int = Field(
        default=0, description="Ranked directives left out by the budget."
    )
    below_relevance: int = Field(
        default=0,
        description="Candidates left out because they were not relevant enough to the task "
        "(the budget is a ceiling, not a target).",
    )


class QueryDiagnostics(BaseModel):
    """Detection results and retrieval statistics of one query (Requirement 12.1)."""

    model_config = _MODEL

    detected_layer: str | None = Field(description="Detected layer.")
    layer_candidates: list[LayerCandidate] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list, description="Detected topics.")
    languages: list[str] = Field(default_factory=list)
    frameworks: list[str] = Field(default_factory=list)
    platforms: list[str] = Field(default_factory=list)
    confidence: float = Field(description="Detection confidence, 0..1.")
    retrieval_stats: RetrievalStats = Field(description="searched / considered / selected.")
    token_budget: int = Field(description="The budget applied.")
    tokens_used: int = Field(description="Exact tokens of context_block.")
    token_counter: str = Field(description="How tokens were counted.")
    forced_must: int = Field(
        default=0, description="Top MUST directives included regardless of budget."
    )
    mode: str | None = Field(default=None, description="The mode slug applied, if any.")
    weights: dict[str, float] = Field(default_factory=dict, description="Weights used.")
    semantic_available: bool = Field(description="Whether SemanticSim could be computed.")
    execution_ms: float = Field(description="Wall time of the whole query.")
    warnings: list[str] = Field(default_factory=list)


class DirectiveQueryResult(BaseModel):
    """The answer of query_directives: a ready context block, citations and diagnostics."""

    model_config = _MODEL

    context_block: str = Field(description="Markdown to prepend to the agent's context.")
    directives: list[RankedDirective] = Field(description="The selected directives, best first.")
    citations: list[Citation] = Field(description="Sources of the directives, by [n].")
    diagnostics: QueryDiagnostics = Field(description="Detection and retrieval diagnostics.")


class RuleSummary(BaseModel):
    """One rule in the knowledge graph."""

    model_config = _MODEL

    rule_id: str = Field(description="Stable rule id (normalised rule name).")
    name: str = Field(description="Rule name as written.")
    title: str | None = Field(default=None, description="Rule title.")
    layer: str | None = Field(default=None, description="Layer of the rule.")
    topics: list[str] = Field(default_factory=list)
    authoritative_for: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list, description="Documents defining it.")
    directive_count: int = Field(description="Directives the rule holds.")
    format: str | None = Field(default=None, description="Source format of the first document.")


class DirectiveDetail(BaseModel):
    """A stored directive, as shown by ``rules show``."""

    model_config = _MODEL

    directive_id: str
    text: str
    severity: Literal["MUST", "SHOULD", "MAY"]
    polarity: Literal["do", "dont", "ask"] = "do"
    section: list[str] = Field(default_factory=list)
    source_path: str
    line_start: int | None = None
    line_end: int | None = None
    rationale: str | None = None
    topics: list[str] = Field(default_factory=list)
    layer: str | None = None
    when_to_apply: list[str] = Field(default_factory=list)
    examples: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Code examples: language (fence info kept), code, anti_pattern flag.",
    )
    anti_patterns: list[str] = Field(default_factory=list, description="Prose anti-patterns.")
    token_count: int

    @property
    def marker(self) -> str:
        """``MUST``, ``MUST NOT``, ``ASK FIRST``…: how the directive is rendered."""
        return directive_marker(self.severity, self.polarity, self.text)


class RuleDetail(BaseModel):
    """A rule with its metadata and every directive."""

    model_config = _MODEL

    summary: RuleSummary
    when_to_apply: list[str] = Field(default_factory=list)
    related_rules: list[str] = Field(default_factory=list)
    directives: list[DirectiveDetail] = Field(default_factory=list)


class RemoveReport(BaseModel):
    """What ``remove_rule`` deleted."""

    model_config = _MODEL

    rule_ids: list[str] = Field(description="Rules removed.")
    documents_removed: int = Field(description="Source documents removed.")
    directives_removed: int = Field(description="Directives removed.")


class QueryRun(BaseModel):
    """One recorded ``query_directives`` call (the ``run`` table, kind ``rules_query``)."""

    model_config = _MODEL

    run_id: int = Field(description="Id of the run.")
    scope: str = Field(description="The scope queried.")
    started_at: str = Field(description="When the query started (RFC 3339 UTC).")
    took_ms: float | None = Field(description="Wall time of the query.")
    payload: dict[str, Any] = Field(
        description="Sanitised task, detected context, retrieval counts, top-5 scores, "
        "budget, tokens used and warnings (never document text)."
    )
