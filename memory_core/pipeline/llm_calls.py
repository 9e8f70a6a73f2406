"""LLM calls of the memory layer's steps: pydantic-ai agents with typed outputs (seed 004 §4.2).

Only used when a step's profile is not ``offline``. Each call returns its output and its usage,
which the service adds to the run log.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import infer_model
from pydantic_ai.providers import Provider, infer_provider_class
from pydantic_ai.settings import ModelSettings

from memory_core.errors import ModelError
from memory_core.llm.availability import model_problem
from memory_core.pipeline.profiles import LayerProfile
from memory_core.redaction import redact_text

__all__ = [
    "CategoryChoices",
    "ExtractedItems",
    "IntentionOut",
    "RerankOut",
    "SufficiencyOut",
    "profile_model",
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


def profile_model(profile: LayerProfile) -> Any:
    """The model ``profile`` runs: a ``Model`` object or a plain ``'provider:model'`` string as
    given (the provider then reads its standard variable, e.g. ``OPENAI_API_KEY``); with
    ``api_key_env`` or ``base_url``, the provider built with that key and URL.

    Raises:
        ModelError: ``api_key_env`` names an unset variable, or the provider cannot be built
            with them.
    """
    if not isinstance(profile.model, str) or not (profile.api_key_env or profile.base_url):
        return profile.model
    options: dict[str, str] = {}
    if profile.base_url:
        options["base_url"] = profile.base_url
    if profile.api_key_env:
        # the one place the layer reads a key: named by the profile, never stored
        key = os.environ.get(profile.api_key_env)
        if not key:
            raise ModelError(
                f"llm profile {profile.name!r} ({profile.model}) takes its API key from "
                f"{profile.api_key_env}, which is not set",
                hint=f"set {profile.api_key_env} in this process's environment, or drop "
                "api_key_env to use the provider's standard variable",
            )
        options["api_key"] = key

    def provider(name: str) -> Provider[Any]:
        return infer_provider_class(name)(**options)  # type: ignore[call-arg]

    try:
        return infer_model(profile.model, provider_factory=provider)
    except Exception as exc:  # unknown provider, SDK missing, no such option: one message
        text = redact_text(str(exc)).replace(options.get("api_key", "\x00"), "***")[:300]
        raise ModelError(
            f"llm profile {profile.name!r} ({profile.model}) cannot be built with "
            f"{' and '.join(sorted(k for k in ('api_key_env', 'base_url') if getattr(profile, k)))}"
            f": {type(exc).__name__}: {text}",
            hint="check the provider name and its SDK extra (pip install 'memoir-mcp[openai]', "
            "…), and that this provider takes an API key / base URL",
        ) from exc


def run_agent(
    profile: LayerProfile, output_type: type[T], payload: Any
) -> tuple[T, dict[str, Any]]:
    """Run one typed agent call with ``profile``; returns the output and its usage.

    Raises:
        ModelError: the model cannot be used here (SDK or key missing: the message says which),
            failed, or never produced a valid output. Never replaced by the offline path.
    """
    model = profile_model(profile)
    if isinstance(model, str):
        problem = model_problem(model)
        if problem is not None:
            source = (
                f", from memoir profile {profile.memoir_profile!r}"
                if profile.memoir_profile
                else ""
            )
            raise ModelError(
                f"llm profile {profile.name!r} ({profile.model}{source}) cannot be used: "
                f"{problem.reason}",
                hint=problem.hint,
            )
    agent: Agent[None, T] = Agent(
        model,
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
