"""evolve (seed 004 §6.1) and run logs (§10.2) on every backend; the async twin."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory_core.errors import PipelineRunError
from memory_core.pipeline.contract import State, StepSpec
from memory_core.pipeline.editing import step
from memory_core.pipeline.scopes import ScopeSelector
from memory_core.pipeline.service import AsyncMemoryService
from memory_core.pipeline.steps import LLMHandle, StepContext
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, CATEGORIES, CHAT, OrgScope


def test_evolve_merges_near_duplicates_and_reports_the_diff(make_service: ServiceFactory) -> None:
    service = make_service()
    service.config("dedupe_merge", merge_threshold=1.01)  # memorize keeps both copies
    first = service.memorize(ALICE, content="I always prefer dark roast coffee in the morning.")
    second = service.memorize(ALICE, content="I always prefer dark roast coffee in the mornings.")
    assert first.items_added != second.items_added
    result = service.evolve(ALICE)
    (merge,) = result.diff["superseded"]
    assert {merge["item_id"], merge["into"]} == {*first.items_added, *second.items_added}
    assert service.store.count_items({"org_id": ("acme",), "user_id": ("alice",)}) == 1
    (winner,) = service.store.items_by_id([merge["into"]])
    assert winner.version == 2 and len(winner.evidence) == 2
    assert service.evolve(ALICE).diff["superseded"] == []  # nothing left to merge


def test_evolve_re_clusters_into_a_changed_taxonomy_and_adjusts_intention(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    service.memorize(ALICE, conversation=CHAT)
    coffee = {"key": "coffee", "name": "Coffee", "description": "coffee, espresso, dark roast"}
    reopened = make_service(categories=[*CATEGORIES, coffee])
    assert reopened.meta["taxonomy_version"] != service.meta["taxonomy_version"]
    diff = reopened.evolve(ALICE).diff
    moved = {m["to"] for m in diff["recategorised"]}
    assert "coffee" in moved
    assert diff["categories"]["coffee"] == {"from": 0, "to": 1}
    category = reopened.get_category(ALICE, "coffee")
    assert category["item_count"] == 1 and "coffee" in category["items"][0]["text"]
    assert diff["intention"]["from_version"] == diff["intention"]["to_version"] == 1


def test_every_run_is_logged_with_timings_usage_scope_range_and_output(
    make_service: ServiceFactory,
) -> None:
    service = make_service()
    service.memorize(ALICE, conversation=CHAT)
    service.retrieve(ScopeSelector(org_id="acme", user_id=["alice", "bob"]), "coffee")
    service.evolve(ALICE)
    runs = make_service().runs()  # persisted: a reopened service reads them
    assert [r["kind"] for r in runs] == ["evolve", "retrieve", "memorize"]
    memorize = runs[2]
    assert memorize["status"] == "ok" and memorize["runner"] == "sync"
    assert memorize["input"]["kind"] == "conversation" and memorize["input"]["messages"] == 3
    assert memorize["scope_range"] == ALICE
    assert memorize["steps"][0]["step_id"] == "ingest_resource"
    assert all(s["ms"] >= 0 for s in memorize["steps"])
    assert memorize["llm_usage"]["extract_items"][0]["model"] == "offline"
    assert memorize["output"]["items_added"] > 0
    assert runs[1]["scope_range"] == {"org_id": ["acme"], "user_id": ["alice", "bob"]}
    assert runs[1]["input"]["query"] == "coffee"


def test_a_failing_step_is_logged_with_its_cause_and_retries_are_counted(
    make_service: ServiceFactory,
) -> None:
    attempts: list[int] = []

    def flaky(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
        attempts.append(1)
        if spec.config.get("always_fail") or (spec.config.get("fail_once") and len(attempts) == 1):
            raise RuntimeError("disk on fire")
        return {}

    service = make_service(steps={"flaky": flaky})
    service.insert_after("route_intention", step("flaky", "flaky", "check", always_fail=True))
    with pytest.raises(PipelineRunError, match="step 'flaky' failed: disk on fire"):
        service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "coffee")
    run = service.runs(1)[0]
    assert run["status"] == "failed" and "disk on fire" in run["error"]
    assert run["steps"][-1]["step_id"] == "flaky" and "RuntimeError" in run["steps"][-1]["error"]
    attempts.clear()
    service.config("flaky", always_fail=None, fail_once=True, retries=1)
    service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "coffee")
    flaky_step = next(s for s in service.runs(1)[0]["steps"] if s["step_id"] == "flaky")
    assert flaky_step["attempts"] == 2


def test_the_async_twin_has_the_same_api(layer_location: dict[str, Any]) -> None:
    async def scenario() -> None:
        storage = {"metadata_store": layer_location}
        service = await AsyncMemoryService.create(
            scope_model=OrgScope,
            categories=CATEGORIES,
            storage_providers=storage,
            embedder="hash:128",
        )
        result = await service.memorize(ALICE, conversation=CHAT)
        assert result.items_added
        found = await service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "peanuts")
        assert "peanuts" in found.items[0]["text"]
        assert (await service.get_latest_intention(ALICE)) is not None
        assert await service.config("build_context", budget_tokens=50) == 2
        assert (await service.diff(1))["retrieve"]
        assert await service.rollback(1) == 3
        assert len(await service.list_categories(ALICE)) == 3
        assert (await service.evolve(ALICE)).diff is not None
        await service.close()

    asyncio.run(scenario())
