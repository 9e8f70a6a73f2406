"""retrieve (seed 004 §6.1, §7): hierarchy with sufficiency checks, cross-scope policy."""

from __future__ import annotations

import itertools
import json

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.errors import InvalidInputError, LimitExceededError
from memory_core.pipeline.extraction import wants_intention
from memory_core.pipeline.scopes import ANY, ScopeSelector
from memory_core.storage.layer import matches
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, BOB, CHAT, EVE

BOB_CHAT = [{"role": "user", "content": "I prefer green tea and I never drink coffee at work."}]
EVE_CHAT = [{"role": "user", "content": "I prefer espresso coffee with dark roast beans daily."}]


def _filled(make_service: ServiceFactory, **kwargs: object):  # type: ignore[no-untyped-def]
    service = make_service(**kwargs)
    service.memorize(ALICE, conversation=CHAT)
    service.memorize(BOB, conversation=BOB_CHAT)
    service.memorize(EVE, conversation=EVE_CHAT)
    return service


def test_item_layer_finds_the_fact_with_its_scope_and_evidence(
    make_service: ServiceFactory,
) -> None:
    service = _filled(make_service)
    result = service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "peanut allergy")
    assert result.layer == "item"
    assert "peanuts" in result.items[0]["text"]
    assert result.items[0]["scope"] == ALICE and result.items[0]["evidence"]
    assert "peanuts" in result.context
    assert [s["layer"] for s in result.sufficiency] == ["intention", "category"]


def test_a_goal_question_stops_at_the_intention_layer(make_service: ServiceFactory) -> None:
    service = _filled(make_service)
    result = service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "what are my goals?")
    assert result.layer == "intention"
    assert result.context.startswith("[goal] I want to finish the billing migration")
    # the layer that sufficed leads; the items that match still come back (ranked offline)
    assert result.items and result.categories == []
    assert result.sufficiency[1] == {"layer": "category", "skipped": True}
    steps = service.runs(1)[0]["steps"]
    assert [s["step_id"] for s in steps][-1] == "build_context"


def test_an_overview_question_stops_at_the_category_layer(make_service: ServiceFactory) -> None:
    service = _filled(make_service)
    service.config("sufficiency_category", threshold=0.0)
    result = service.retrieve(ScopeSelector(org_id="acme", user_id=ANY), "summary of preferences")
    assert result.layer == "category" and result.items
    assert result.categories and "[category" in result.context
    assert result.context.index("[category") < result.context.index("\n- ")


def test_a_request_stating_a_need_is_answered_from_items_not_the_intention(
    make_service: ServiceFactory,
) -> None:
    # alice has an intention (a goal and a constraint); a request that says "I want" / "I plan"
    # or asks for a status is not a question about her goals and must get her items
    service = _filled(make_service)
    alice = ScopeSelector(org_id="acme", user_id="alice")
    for query in (
        "I want to know which food I am allergic to",
        "I plan a team lunch, what must it avoid?",
        "peanut allergy status",
    ):
        result = service.retrieve(alice, query)
        assert result.layer == "item", query
        assert result.sufficiency[0]["sufficient"] is False, query
        assert any("peanuts" in i["text"] for i in result.items), query


@pytest.mark.parametrize(
    ("query", "about_goals"),
    [
        ("what are my goals?", True),
        ("What is the user trying to achieve?", True),
        ("what's the plan for the launch", True),
        ("how much progress have we made", True),
        ("I want to cancel my order", False),
        ("I plan to move, how do I change my address?", False),
        ("I'm trying to list the payment options", False),
        ("what is the fee if I want to cancel", False),
        ("what plans do you offer", False),
        ("order 123 status", False),
    ],
)
def test_only_questions_about_goals_or_progress_want_the_intention(
    query: str, about_goals: bool
) -> None:
    assert wants_intention(query) is about_goals


def test_cross_scope_retrieval_with_in_and_any(make_service: ServiceFactory) -> None:
    service = _filled(make_service)
    both = service.retrieve(ScopeSelector(org_id="acme", user_id=["alice", "bob"]), "coffee tea")
    users = {i["scope"]["user_id"] for i in both.items}
    assert users == {"alice", "bob"}
    anyone = service.retrieve(ScopeSelector(org_id="acme", user_id=ANY), "coffee tea")
    assert {i["scope"]["org_id"] for i in anyone.items} == {"acme"}
    assert service.runs(1)[0]["scope_range"] == {"org_id": ["acme"], "user_id": "ANY"}


def test_the_policy_refuses_any_on_a_boundary_field_missing_fields_and_wide_ranges(
    make_service: ServiceFactory,
) -> None:
    service = _filled(make_service, max_combinations=2)
    with pytest.raises(InvalidInputError, match="boundary field 'org_id' with ANY"):
        service.retrieve(ScopeSelector(org_id=ANY, user_id="alice"), "coffee")
    with pytest.raises(InvalidInputError, match=r"missing \['user_id'\]"):
        service.retrieve({"org_id": "acme"}, "coffee")
    with pytest.raises(LimitExceededError, match="3 is over the limit of 2"):
        service.retrieve(ScopeSelector(org_id="acme", user_id=["a", "b", "c"]), "coffee")
    with pytest.raises(InvalidInputError, match="non-empty query"):
        service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "  ")


def test_no_selector_reads_a_scope_outside_its_boundary(make_service: ServiceFactory) -> None:
    service = _filled(make_service)
    orgs = [["acme"], ["evil"], ["acme", "evil"], ["nobody"]]
    users: list[object] = [ANY, "alice", "bob", "eve", ["alice", "eve"], ["bob", "nobody"]]
    queries = ["coffee", "what are my goals?", "dark roast", "summary of preferences"]
    for org, user, query in itertools.product(orgs, users, queries):
        selector = ScopeSelector(org_id=org, user_id=user)
        allowed = {
            "org_id": tuple(org),
            "user_id": None if user is ANY else tuple([user] if isinstance(user, str) else user),
        }
        result = service.retrieve(selector, query)
        scopes = [i["scope"] for i in result.items] + [c["scope"] for c in result.categories]
        if result.intention:
            scopes.append(result.intention["scope"])
        for scope in scopes:
            assert matches(scope, allowed), (selector, query, scope)
        if org == ["acme"]:
            assert "espresso" not in result.context
    for user, query in itertools.product(users, queries):  # ANY on the boundary never reads
        with pytest.raises(InvalidInputError, match="boundary field 'org_id' with ANY"):
            service.retrieve(ScopeSelector(org_id=ANY, user_id=user), query)


def test_without_a_vector_index_retrieval_falls_back_to_lexical_and_categories(
    make_service: ServiceFactory,
) -> None:
    service = _filled(make_service, vector_index="none")
    assert service.meta["providers"]["storage"]["vector_index"]["provider"] == "none"
    result = service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "peanuts lunch")
    assert result.fallbacks and "vector index unavailable" in result.fallbacks[0]
    assert "peanuts" in result.items[0]["text"]


def test_candidate_caps_bound_the_rerank_set(make_service: ServiceFactory) -> None:
    service = _filled(make_service, max_rerank_candidates=2, max_vector_top_k=1)
    result = service.retrieve(ScopeSelector(org_id="acme", user_id=ANY), "coffee tea peanuts")
    assert 0 < len(result.items) <= 2


def test_the_rerank_step_uses_a_pydantic_ai_model_and_logs_usage(
    make_service: ServiceFactory,
) -> None:
    def reranker(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        payload = json.loads(str(messages[0].parts[-1].content))  # type: ignore[union-attr]
        last = len(payload["candidates"]) - 1
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, json.dumps({"order": [last]}))]
        )

    service = _filled(
        make_service,
        llm_providers={"default": {"model": "offline"}, "judge": FunctionModel(reranker)},
    )
    service.config("verify_rerank", llm_profile="judge")
    result = service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "coffee peanuts")
    assert len(result.items) == 1
    usage = service.runs(1)[0]["llm_usage"]["verify_rerank"][0]
    assert usage["profile"] == "judge" and usage["requests"] == 1
