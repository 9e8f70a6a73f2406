"""What memorize, retrieve and evolve return (JSON-friendly pydantic values)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["EvolveResult", "MemorizeResult", "RetrieveResult"]


class MemorizeResult(BaseModel):
    run_id: str
    resource_id: str | None
    duplicate: bool = False
    items_added: list[str] = Field(default_factory=list)
    items_merged: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)
    intention_version: int = 0
    missing_capabilities: list[dict[str, str]] = Field(default_factory=list)
    pipeline_revision: int
    scheduled_evolve: dict[str, Any] | None = Field(
        default=None,
        description="with an evolve_schedule: status ok | failed | not_due | skipped, the "
        "evolve's run_id when one ran, and the reason",
    )


class RetrieveResult(BaseModel):
    run_id: str
    context: str
    layer: str = Field(description="where retrieval stopped: intention, category or item")
    items: list[dict[str, Any]] = Field(default_factory=list)
    categories: list[dict[str, Any]] = Field(default_factory=list)
    intention: dict[str, Any] | None = None
    sufficiency: list[dict[str, Any]] = Field(default_factory=list)
    fallbacks: list[str] = Field(default_factory=list)
    tokens: int = 0
    pipeline_revision: int


class EvolveResult(BaseModel):
    run_id: str
    diff: dict[str, Any]
    pipeline_revision: int
