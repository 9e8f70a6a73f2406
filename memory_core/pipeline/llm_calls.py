"""LLM calls of the memory layer's steps: pydantic-ai agents with typed outputs (seed 004 §4.2).

Only used when a step's profile is not ``offline``. Each call returns its output and its usage,
which the service adds to the run log.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.settings import ModelSettings

from memory_core.errors import ModelError
from memory_core.pipeline.profiles import LayerProfile

__all__ = [
    "CategoryChoices",
    "ExtractedItems",
    "IntentionOut",
    "RerankOut",
    "SufficiencyOut",
    "run_agent",
]

T = TypeVar("T", bound=BaseModel)


class ExtractedItem(BaseModel):
    text: str = Field(description="one self-contained fact, preference, goal or decision")
    quote: str = Field(description="the exact words of the resource it comes from")
    confidence: float = Field(ge=0, le=1)
    stability: Literal["stable", "evolving", "transient"]


class ExtractedItems(BaseModel):
    items: list[ExtractedItem]


class CategoryChoice(BaseModel):
    index: int = Field(description="index of the item in the given list")
    category_key: str


class CategoryChoices(BaseModel):
    choices: list[CategoryChoice]


class IntentionOut(BaseModel):
    goals: list[str]
    constraints: list[str]
    progress: list[str]


class SufficiencyOut(BaseModel):
    sufficient: bool
    reason: str


class RerankOut(BaseModel):
    order: list[int] = Field(description="indices of the relevant candidates, best first")


_INSTRUCTIONS = {
    ExtractedItems: "Extract reusable memory items from the resource. Quote your evidence.",
    CategoryChoices: "Assign every item to exactly one category key of the taxonomy.",
    IntentionOut: "Summarise the user's goals, constraints and progress from the items.",
    SufficiencyOut: "Say whether the context already answers the query.",
    RerankOut: "Order the candidates by how well they answer the query; drop irrelevant ones.",
}


def run_agent(
    profile: LayerProfile, output_type: type[T], payload: Any
) -> tuple[T, dict[str, Any]]:
    """Run one typed agent call with ``profile``; returns the output and its usage.

    Raises:
        ModelError: the model failed or never produced a valid output.
    """
    agent: Agent[None, T] = Agent(
        profile.model,
        output_type=output_type,
        instructions=_INSTRUCTIONS.get(output_type, ""),
        retries=max(profile.retries, 1),
    )
    settings: ModelSettings = {
        "temperature": profile.temperature,
        "timeout": profile.timeout_s,
    }
    if profile.max_tokens is not None:
        settings["max_tokens"] = profile.max_tokens
    try:
        result = agent.run_sync(
            json.dumps(payload, ensure_ascii=False, default=str),
            model_settings=settings,
        )
    except Exception as exc:  # the step's failure names the profile and the model
        raise ModelError(
            f"llm profile {profile.name!r} ({profile.model_label}) failed: {exc}",
            hint="check the profile's model and credentials, or set it to 'offline'",
        ) from exc
    usage = result.usage
    return result.output, {
        "profile": profile.name,
        "model": profile.model_label,
        "requests": usage.requests,
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
    }
