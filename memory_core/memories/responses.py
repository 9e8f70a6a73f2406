"""The values ``Memoir.memories`` returns (pydantic: they cross into JSON for the CLI, MCP and
REST). One model per operation, so each REST endpoint is one method and one response."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AnchorView",
    "BackfillReport",
    "ConflictView",
    "EntryPage",
    "ExportReport",
    "ForgetResult",
    "ImportIssue",
    "ImportReport",
    "MemoryStats",
    "MemorySummary",
    "MemoryView",
    "RecallHit",
    "RecallResult",
    "RememberResult",
    "RollupReport",
    "Scores",
    "SettingsView",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Scores(_Model):
    relevance: float
    recency: float
    importance: float
    total: float


class AnchorView(_Model):
    path: str
    start_line: int
    end_line: int
    commit: str | None = None
    status: Literal["valid", "moved", "stale", "unchecked"] = "unchecked"
    now_start_line: int | None = None
    now_end_line: int | None = None
    reason: str | None = None


class MemoryView(_Model):
    """One memory with every field of the spec's data model."""

    id: str
    user: str
    space: str
    role: str
    text: str
    summary: str | None = None
    tags: list[str]
    source_ids: list[str]
    created_at: str
    updated_at: str
    importance: float
    pinned: bool
    manually_saved: bool
    repeat_count: int
    needs_embedding: bool
    simhash: str | None = Field(None, description="64-bit SimHash, 16 hex digits.")
    metadata_confidence: float
    category: str
    entities: list[str]
    keyphrases: list[str]
    last_scores: dict[str, Any] | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    superseded_by: str | None = None
    supersedes: list[str] = Field(default_factory=list)
    anchor: AnchorView | None = None
    rollup: bool = False


class ConflictView(_Model):
    id: str
    text: str
    reason: str


class RememberResult(_Model):
    """What ``remember`` did: created a row, merged into a near-duplicate, or wrote nothing."""

    status: Literal["created", "merged", "blocked", "skipped", "conflict"]
    memory: MemoryView | None = None
    reason: str | None = None
    superseded: list[str] = Field(default_factory=list)
    conflicts: list[ConflictView] = Field(default_factory=list)
    trimmed: list[str] = Field(default_factory=list)
    trim_blocked: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    user: str
    space: str


class RecallHit(_Model):
    id: str
    text: str
    summary_used: bool = False
    tags: list[str]
    source_ids: list[str]
    created_at: str
    category: str
    pinned: bool
    scores: Scores
    anchor: AnchorView | None = None
    superseded_by: str | None = None


class RecallResult(_Model):
    query: str
    status: Literal["ok", "disabled", "incognito"] = "ok"
    results: list[RecallHit]
    context: str
    used_tokens: int
    budget_tokens: int
    now: str
    user: str
    space: str
    warnings: list[str] = Field(default_factory=list)
    explain: dict[str, Any] | None = None


class ForgetResult(_Model):
    id: str
    forgotten: bool
    tombstone_expires_at: str | None = None
    user: str
    space: str


class SettingsView(_Model):
    user: str
    space: str
    memory_enabled: bool
    incognito_default: bool
    soft_cap: int
    incognito: bool = Field(description="Whether the asked session is incognito now.")
    session: str
    sessions: dict[str, bool] = Field(default_factory=dict)


class EntryPage(_Model):
    entries: list[MemoryView]
    total: int
    limit: int
    offset: int
    user: str
    space: str


class MemorySummary(_Model):
    user: str
    space: str
    text: str
    entries: int
    pinned: int
    manually_saved: int
    top_tags: list[tuple[str, int]]


class BackfillReport(_Model):
    embedded: int = 0
    failed: int = 0
    attempts: int = 0
    batches: int = 0
    remaining: int = 0
    neighbour_tags: int = 0
    retention_deleted: int = 0
    rollups: int = 0
    took_ms: float = 0.0
    embed_ms: float = 0.0
    per_second: float = 0.0
    p95_time_to_embed_ms: float | None = None
    warnings: list[str] = Field(default_factory=list)


class MemoryStats(_Model):
    """Telemetry of one space (spec "Telemetry & Alerts")."""

    user: str
    space: str
    entries: int
    pinned: int
    manually_saved: int
    superseded: int
    soft_cap: int
    backlog: int
    backlog_oldest_age_s: float | None
    backlog_alert: bool
    embed_p95_ms: float | None
    embed_failure_rate: float | None
    dedupe_saves: int
    trims: int
    trimmed_entries: int
    trim_blocked_alerts: int
    recalls: int
    recall_hit_rate: float | None
    used_rate: float | None
    user_actions: dict[str, int]
    daily: list[dict[str, Any]]
    alerts: list[str]


class ImportIssue(_Model):
    line: int
    error: str


class ImportReport(_Model):
    format: str
    imported: int = 0
    merged: int = 0
    skipped: int = 0
    entities: int = 0
    relations: int = 0
    errors: list[ImportIssue] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class ExportReport(_Model):
    exported: int
    settings: int
    out: str | None = None


class RollupReport(_Model):
    rollups: list[dict[str, Any]]
    archived: int
