"""The values the hierarchy API returns (memoirAI Requirements 4, 6 and 9).

Every result says whether it succeeded (``status``), and on failure carries an ``error`` with a
code, a message and the remediation (``hint``). :meth:`raise_for_status` turns a failed result
into the matching :class:`MemoirError` for adapters that prefer exceptions (MCP tools).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from memory_core.errors import MemoirError, ModelError, NotFoundError

__all__ = [
    "CategoryNode",
    "CategoryTree",
    "Citation",
    "ErrorInfo",
    "IngestResult",
    "IngestedChunk",
    "KnowledgeRemoval",
    "QueryResult",
    "StreamInfo",
    "UsedChunk",
]

_ERRORS: dict[str, type[MemoirError]] = {
    "model_error": ModelError,
    "empty_hierarchy": NotFoundError,
    "no_chunks": NotFoundError,
}


class ErrorInfo(BaseModel):
    """What failed and what to do about it (every failure has a remediation)."""

    code: str
    message: str
    hint: str


class _Result(BaseModel):
    status: Literal["ok", "error"] = "ok"
    error: ErrorInfo | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def raise_for_status(self) -> None:
        """Raise the error this result carries, if any.

        Raises:
            ModelError: every model failed.
            NotFoundError: nothing is stored to answer from.
            MemoirError: any other failure.
        """
        if self.error is None:
            return
        cls = _ERRORS.get(self.error.code, MemoirError)
        raise cls(self.error.message, hint=self.error.hint)


class IngestedChunk(BaseModel):
    chunk_id: str
    item_id: int
    category_path: str
    category_id: int
    token_count: int
    chars: int
    start_offset: int
    end_offset: int
    already_stored: bool = False


class StreamInfo(BaseModel):
    """A streamed ingest: the input's size, its batches, and its chunks (all batches)."""

    bytes: int
    resource_id: int
    batches: int = 0
    batches_skipped: int = Field(0, description="Stored by an earlier, interrupted run.")
    chunks: int = 0
    new_chunks: int = 0


class KnowledgeRemoval(BaseModel):
    """What ``forget`` removed from the knowledge tree."""

    scope: str
    chunks: int = Field(description="Chunks deleted with their lexical and vector rows.")
    categories: int = Field(description="Categories deleted because they were left empty.")
    sources: int = Field(0, description="Ingest records of the source deleted.")


class IngestResult(_Result):
    scope: str
    source: str | None = None
    chunks: list[IngestedChunk] = Field(default_factory=list)
    categories_created: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    model_used: dict[str, list[str]] = Field(default_factory=dict)
    llm_calls: int = 0
    total_latency: float = 0.0
    timestamp: str
    run_id: int | None = None
    stream: StreamInfo | None = Field(
        None, description="Set for a streamed ingest: ``chunks`` then lists the first ones only."
    )


class UsedChunk(BaseModel):
    """One chunk given to the final call, with where it came from."""

    chunk_id: str
    item_id: int
    text_content: str
    category_path: str
    ranked_relevance: int | None = Field(
        None, description="1-10, only when several categories were chosen at a level"
    )
    confidence: float | None = None
    created_at: str
    chosen_strategy: str
    token_count: int
    source: str | None = Field(None, description="Where the text came from (ingest's source).")


class Citation(BaseModel):
    chunk_id: str
    category_path: str
    source: str | None = None


class QueryResult(_Result):
    question: str
    scope: str
    strategy: str
    answer: str | None = None
    used_chunks: list[UsedChunk] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)
    dropped_paths: list[str] = Field(default_factory=list)
    explored_paths: list[str] = Field(default_factory=list)
    empty_leaves: list[str] = Field(default_factory=list)
    max_token_budget: int
    candidate_tokens: int = 0
    summarized: bool = False
    parts: int = 0
    model_used: dict[str, list[str]] = Field(default_factory=dict)
    llm_calls: dict[str, int] = Field(default_factory=dict)
    total_latency: float = 0.0
    timestamp: str
    run_id: int | None = None
    warnings: list[str] = Field(default_factory=list)


class CategoryNode(BaseModel):
    category_id: int
    name: str
    level: int
    chunk_count: int | None = None
    children: list[CategoryNode] = Field(default_factory=list)


class CategoryTree(BaseModel):
    scope: str
    depth: int
    max_categories: int
    total: int
    nodes: list[CategoryNode] = Field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump()
