"""Agents: pydantic schemas, the Literal switch at the cap, retries, fallback and model names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from memory_core.config import LLMSettings
from memory_core.errors import ModelError
from memory_core.llm.agents import HierarchyAgents, forced_classify_type, selection_type
from memory_core.llm.chain import build_step_model
from memory_core.llm.offline import OfflineModel
from memory_core.llm.profiles import STEPS, resolve_profile

pytestmark = pytest.mark.anyio


def agents_with(model: Any, offline: OfflineModel, **llm: Any) -> HierarchyAgents:
    settings = LLMSettings(**llm)
    return HierarchyAgents(
        {
            s: build_step_model(
                resolve_profile(settings, s),
                offline=offline.model,
                sampling=model,
                use_sampling=settings.use_mcp_sampling,
            )
            for s in STEPS
        }
    )


def replies(*texts: str) -> tuple[FunctionModel, list[int]]:
    seen: list[int] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        return ModelResponse(parts=[TextPart(texts[min(len(seen), len(texts)) - 1])])

    return FunctionModel(respond, model_name="scripted"), seen


def test_the_forced_type_is_a_literal_of_existing_names() -> None:
    forced = forced_classify_type(["Databases", "Networks"])
    schema = forced.model_json_schema()
    assert schema["properties"]["category"]["enum"] == ["Databases", "Networks"]
    with pytest.raises(ValidationError):
        forced.model_validate({"category": "Something New"})


def test_the_selection_type_only_accepts_listed_options() -> None:
    selection = selection_type(["A / B", "A / C"])
    assert selection.model_validate({"selected": [{"category": "A / C"}]})
    with pytest.raises(ValidationError):
        selection.model_validate({"selected": [{"category": "Z"}]})
    with pytest.raises(ValidationError):
        selection.model_validate({"selected": [{"category": "A / B", "ranked_relevance": 11}]})


async def test_an_invented_name_at_the_cap_is_retried_until_a_listed_one(
    offline: OfflineModel,
) -> None:
    model, seen = replies('{"category": "Brand New"}', '{"category": "Networks"}')
    outcome = await agents_with(model, offline).classify(
        text="t", level=1, depth=3, path=[], options=["Databases", "Networks"], allow_new=False
    )
    assert outcome.output.category == "Networks" and len(seen) == 2
    assert outcome.requests == 2


async def test_wrong_selection_count_gets_a_clarified_retry(offline: OfflineModel) -> None:
    one = json.dumps({"selected": [{"category": "A"}]})
    two = json.dumps({"selected": [{"category": "A"}, {"category": "B"}]})
    model, seen = replies(one, two)
    outcome = await agents_with(model, offline).select(
        question="q", level=1, options=["A", "B", "C"], count=2
    )
    assert [s.category for s in outcome.output.selected] == ["A", "B"] and len(seen) == 2


async def test_three_failed_retries_raise_a_model_error_with_a_hint(
    offline: OfflineModel,
) -> None:
    model, seen = replies("nonsense")
    with pytest.raises(ModelError) as info:
        await agents_with(model, offline).answer(question="q", passages=[])
    assert len(seen) == 4  # the first try and three retries
    assert info.value.hint and "offline" in info.value.hint


async def test_citations_of_unknown_chunks_are_retried(offline: OfflineModel) -> None:
    bad = json.dumps({"answer": "x", "cited_chunk_ids": ["nope"]})
    good = json.dumps({"answer": "x", "cited_chunk_ids": ["c1"]})
    model, seen = replies(bad, good)
    outcome = await agents_with(model, offline).answer(
        question="q", passages=[{"chunk_id": "c1", "category_path": "A", "text": "t"}]
    )
    assert outcome.output.cited_chunk_ids == ["c1"] and len(seen) == 2


async def test_test_model_output_is_accepted_and_named(offline: OfflineModel) -> None:
    model = TestModel(custom_output_text='{"summary": "short"}')
    agents = agents_with(model, offline)
    outcome = await agents.summarise(question="q", text="t", target_tokens=5, part=1, parts=1)
    assert outcome.output.summary == "short" and outcome.model_name == "test"
    assert agents.stats.models_used == {"summarise": ["test"]}


async def test_a_failing_source_falls_back_and_the_answering_model_is_named(
    offline: OfflineModel,
) -> None:
    def down(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise TimeoutError("no answer")

    agents = agents_with(FunctionModel(down, model_name="flaky"), offline)
    outcome = await agents.select(question="q", level=1, options=["A", "B"], count=1)
    assert outcome.model_name == "memoir-offline"
    assert agents.models["traverse"].sources == ["function:flaky", "function:memoir-offline"]


async def test_sampling_can_be_switched_off_by_configuration(offline: OfflineModel) -> None:
    model, seen = replies('{"summary": "from sampling"}')
    agents = agents_with(model, offline, use_mcp_sampling=False)
    outcome = await agents.summarise(question="q", text="t", target_tokens=5, part=1, parts=1)
    assert seen == [] and outcome.model_name == "memoir-offline"
