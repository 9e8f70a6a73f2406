"""Pipeline editing (seed 004 §8.2-8.4): validate on change, snapshot on change, profiles."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.errors import ConfigError, NotFoundError
from memory_core.pipeline.contract import State, StepSpec
from memory_core.pipeline.editing import step
from memory_core.pipeline.scopes import ScopeSelector
from memory_core.pipeline.steps import LLMHandle, StepContext
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, CHAT


def tag_items(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    tag = spec.config.get("tag", "tagged")
    return {"candidates": [{**c, "text": f"{c['text']} [{tag}]"} for c in state["candidates"]]}


# Seed 004 §8.1, step by step: (the spec's name, step_id, role, an LLM step?). The spec writes
# "persist/index" in memorize and evolve and "sufficiency_check" twice in retrieve; the ids
# tell the two apart (the impl keeps the spec's name where one implementation serves both).
SPEC_8_1: dict[str, list[tuple[str, str, str, bool]]] = {
    "memorize": [
        ("ingest_resource", "ingest_resource", "ingest", False),
        ("preprocess_multimodal", "preprocess_multimodal", "preprocess", False),
        ("extract_items", "extract_items", "extract", True),
        ("dedupe_merge", "dedupe_merge", "dedupe", False),
        ("categorize_items", "categorize_items", "categorize", True),
        ("infer_intention", "infer_intention", "intention", True),
        ("persist/index", "persist_index", "persist", False),
    ],
    "retrieve": [
        ("route_intention", "route_intention", "route", False),
        ("sufficiency_check", "sufficiency_intention", "verify", True),
        ("route_category", "route_category", "route", False),
        ("sufficiency_check", "sufficiency_category", "verify", True),
        ("recall_items", "recall_items", "recall", False),
        ("verify_rerank", "verify_rerank", "verify", True),
        ("build_context", "build_context", "context", False),
    ],
    "evolve": [
        ("select_targets", "select_targets", "select", False),
        ("refresh_items", "refresh_items", "dedupe", False),
        ("re_cluster_categories", "re_cluster_categories", "categorize", True),
        ("adjust_intention", "adjust_intention", "intention", True),
        ("persist/index", "persist_evolution", "persist", False),
        ("emit_diff", "emit_diff", "report", False),
    ],
}


def test_the_default_pipelines_are_the_spec_s_step_lists_in_order(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    for name, expected in SPEC_8_1.items():
        steps = service.pipeline(name).steps  # type: ignore[arg-type]
        got = [(s.step_id, s.role, "llm" in s.capabilities) for s in steps]
        assert got == [(step_id, role, llm) for _, step_id, role, llm in expected], name
        for spec_name, spec in zip([e[0] for e in expected], steps, strict=True):
            assert spec.enabled
            assert spec.impl == spec_name or spec_name == "persist/index"
            if spec_name == "persist/index":
                assert "db_write" in spec.capabilities
    retrieve = service.pipeline("retrieve").steps
    assert [s.config.get("layer") for s in retrieve[1:4:2]] == ["intention", "category"]
    # the runner executes them in that order: the run log lists the same ids
    service.memorize(ALICE, conversation=CHAT)
    service.retrieve(ScopeSelector(**ALICE), "peanuts")
    service.evolve(ALICE)
    for run in service.runs():
        assert [s["step_id"] for s in run["steps"]] == [e[1] for e in SPEC_8_1[run["kind"]]]


def test_a_config_change_is_a_revision_that_can_be_listed_diffed_and_rolled_back(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    assert service.config("build_context", budget_tokens=300) == 2
    assert [r["revision"] for r in service.revisions()] == [1, 2]
    diff = service.diff(1)
    assert diff == {
        "retrieve": {
            "changed": {
                "build_context": {
                    "config": {"from": {"budget_tokens": 1200}, "to": {"budget_tokens": 300}}
                }
            }
        }
    }
    assert service.rollback(1) == 3
    assert service.diff(1, 3) == {}
    assert service.pipeline("retrieve").steps[-1].config["budget_tokens"] == 1200
    assert service.meta["pipeline_revision"] == 3
    # revisions survive a reopen
    assert [r["revision"] for r in make_service().revisions()] == [1, 2, 3]


def test_removing_a_step_others_depend_on_is_refused_naming_the_dependency(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    with pytest.raises(ConfigError) as caught:
        service.remove("extract_items")
    assert "'dedupe_merge'" in str(caught.value) and "['candidates']" in str(caught.value)
    with pytest.raises(ConfigError, match="'dedupe_merge'"):
        service.disable("extract_items")
    assert service.pipeline_revision == 1 and len(service.revisions()) == 1
    # a step nothing depends on can go, and comes back on rollback
    assert service.disable("preprocess_multimodal") == 2
    assert not service.pipeline("memorize").steps[1].enabled
    service.rollback(1)
    assert service.pipeline("memorize").steps[1].enabled


def test_an_undefined_profile_or_missing_capability_is_refused(
    make_service: ServiceFactory,
) -> None:
    service = make_service(vector_index="none")
    with pytest.raises(ConfigError, match="llm profile 'strong', which is not defined"):
        service.config("extract_items", llm_profile="strong")
    service.register_step("tag_items", tag_items)
    needs_vectors = StepSpec(
        "vector_tagger",
        "tag_items",
        "extract",
        requires=frozenset({"candidates"}),
        produces=frozenset({"candidates"}),
        capabilities=frozenset({"vector"}),
    )
    with pytest.raises(ConfigError, match=r"capabilities \['vector'\]"):
        service.insert_after("extract_items", needs_vectors)
    with pytest.raises(ConfigError, match="unknown impl 'nope'"):
        service.replace("extract_items", step("x", "nope", "extract"))
    with pytest.raises(NotFoundError, match="no pipeline step 'ghost'"):
        service.config("ghost", top_k=1)


def test_inserted_and_replacing_steps_run(make_service: ServiceFactory) -> None:
    service = make_service(steps={"tag_items": tag_items})
    tagger = step("tagger", "tag_items", "extract", ["candidates"], ["candidates"], tag="t1")
    with pytest.raises(ConfigError, match=r"'tagger' in memorize requires \['candidates'\]"):
        service.insert_before("extract_items", tagger)
    service.insert_after("extract_items", tagger)
    result = service.memorize(ALICE, conversation=CHAT)
    texts = [i.text for i in service.store.items_by_id(result.items_added)]
    assert texts and all(t.endswith("[t1]") for t in texts)
    service.config("tagger", tag="t2")
    assert service.diff(2)["memorize"]["changed"]["tagger"]["config"]["to"] == {"tag": "t2"}
    ids = [s.step_id for s in service.pipeline("memorize").steps]
    assert ids.index("tagger") == ids.index("extract_items") + 1


def _recording_model(name: str, calls: list[str]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(name)
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, json.dumps({"order": [0]}))]
        )

    return FunctionModel(respond)


def test_profile_precedence_is_step_then_role_then_default(make_service: ServiceFactory) -> None:
    calls: list[str] = []
    providers: dict[str, Any] = {
        "default": {"model": _recording_model("default", calls)},
        "role": {"model": _recording_model("role", calls)},
        "step": {"model": _recording_model("step", calls)},
        "local": {"model": "offline"},
    }
    service = make_service(llm_providers={**providers, "default": {"model": "offline"}})
    service.memorize(ALICE, conversation=CHAT)
    selector = ScopeSelector(org_id="acme", user_id="alice")

    def rerank_profile() -> str:
        return str(service.runs(1)[0]["llm_usage"]["verify_rerank"][0]["profile"])

    service.retrieve(selector, "coffee")
    assert rerank_profile() == "default" and calls == []
    service = make_service(llm_providers=providers, role_profiles={"verify": "role"})
    # the sufficiency steps share the "verify" role; keep them offline, rerank on the role
    service.config("sufficiency_intention", llm_profile="local")
    service.config("sufficiency_category", llm_profile="local")
    calls.clear()
    service.retrieve(selector, "coffee")
    assert calls == ["role"] and rerank_profile() == "role"
    service.config("verify_rerank", llm_profile="step")
    calls.clear()
    service.retrieve(selector, "coffee")
    assert calls == ["step"] and rerank_profile() == "step"
