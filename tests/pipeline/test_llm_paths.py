"""Every LLM-capable step through pydantic-ai (TestModel / FunctionModel), and the fallbacks."""

from __future__ import annotations

import json

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from memory_core.pipeline.scopes import ANY, ScopeSelector
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, BOB, CHAT


def test_all_llm_steps_run_through_a_pydantic_ai_model(make_service: ServiceFactory) -> None:
    service = make_service(llm_providers={"default": {"model": TestModel()}})
    service.memorize(ALICE, conversation=CHAT)
    service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "coffee")
    service.evolve(ALICE)
    llm_steps = {
        s.step_id
        for name in ("memorize", "retrieve", "evolve")
        for s in service.pipeline(name).steps  # type: ignore[arg-type]
        if "llm" in s.capabilities
    }
    called = set()
    for run in service.runs():
        assert run["status"] == "ok", run["error"]
        for step_id, usage in run["llm_usage"].items():
            assert usage[0]["model"].startswith("TestModel")
            if usage[0]["requests"]:
                called.add(step_id)
    # the sufficiency and rerank steps have nothing to judge when extraction found nothing
    # to retrieve; extraction, categorisation and intention always call the model
    assert {"extract_items", "infer_intention", "adjust_intention"} <= called <= llm_steps


def test_a_model_that_says_the_categories_suffice_stops_retrieval_there(
    make_service: ServiceFactory,
) -> None:
    def judge(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        payload = json.loads(str(messages[0].parts[-1].content))  # type: ignore[union-attr]
        verdict = {"sufficient": payload["layer"] == "category", "reason": "summaries cover it"}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(verdict))])

    service = make_service(
        llm_providers={"default": {"model": "offline"}, "judge": FunctionModel(judge)},
        role_profiles={"verify": "judge"},
    )
    service.config("verify_rerank", llm_profile="default")
    service.memorize(ALICE, conversation=CHAT)
    result = service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "coffee")
    assert result.layer == "category" and result.items
    assert result.sufficiency[-1] == {
        "layer": "category",
        "sufficient": True,
        "reason": "summaries cover it",
    }


def test_a_range_too_wide_for_a_vector_scan_falls_back_to_lexical_and_anchors(
    make_service: ServiceFactory,
) -> None:
    service = make_service(max_vector_scan_items=2)
    service.memorize(ALICE, conversation=CHAT)
    service.memorize(BOB, content="I never drink coffee after lunch because of my sleep.")
    result = service.retrieve(ScopeSelector(org_id="acme", user_id=ANY), "coffee")
    assert result.fallbacks and "no vector scan" in result.fallbacks[0]
    assert result.items and all("vector" not in i["arms"] for i in result.items)
    assert any("coffee" in i["text"] for i in result.items)
