"""The memory layer's memorize / retrieve / evolve give the same results and the same run logs
on every runner, on each of the three stores (in-memory, a SQLite file, PostgreSQL + pgvector):
one suite over runners x backends, each compared with the sync runner on the same backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory_core.errors import ConfigError, InvalidInputError, PipelineRunError
from memory_core.pipeline.contract import Runner, State, StepSpec, SyncRunner
from memory_core.pipeline.editing import step
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.scopes import ANY, ScopeSelector
from memory_core.pipeline.steps import LLMHandle, StepContext
from tests.pipeline.layer_kit import ALICE, BOB, CHAT, EVE
from tests.pipeline_runners.conftest import (
    BACKENDS,
    StoreFactory,
    opened_service,
    org_service,
    runner_named,
)


def _run_record(run: dict[str, Any]) -> tuple[Any, ...]:
    """What a run log says that must not depend on the runner (timings and ids do)."""
    return (
        run["kind"],
        run["status"],
        tuple(s["step_id"] for s in run["steps"]),
        repr(run["input"]),
        repr(run["scope_range"]),
        repr(run["output"]),
        tuple(sorted(run["llm_usage"])),
    )


def _session(runner: Runner, metadata_store: Any = None) -> dict[str, Any]:
    """memorize, retrieve and evolve on a fresh service; what each returned, without ids."""
    with opened_service(runner, metadata_store) as service:
        memorized = service.memorize(ALICE, conversation=CHAT)
        texts = {
            i.item_id: i.text
            for i in service.store.items({"org_id": ("acme",), "user_id": ("alice",)})
        }
        retrieved = service.retrieve(
            ScopeSelector(org_id="acme", user_id="alice"), "peanut allergy"
        )
        evolved = service.evolve(ALICE)
        runs = service.runs()
    for run in runs:  # every run is logged with its timings, on every runner
        assert run["runner"] == runner.name
        assert run["steps"] and all(s["ms"] >= 0 for s in run["steps"]), run
    return {
        "items": sorted(texts[i] for i in memorized.items_added),
        "categories": sorted(memorized.categories),
        "intention_version": memorized.intention_version,
        "layer": retrieved.layer,
        "retrieved": [item["text"] for item in retrieved.items],
        "context": retrieved.context,
        "evolve_keys": sorted(evolved.diff),
        "run_log": sorted(_run_record(run) for run in runs),
    }


_SYNC_SESSIONS: dict[str, dict[str, Any]] = {}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["burr", "temporal", "temporal_local"])
def test_the_layer_behaves_the_same_on_every_runner_and_backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fresh_store: StoreFactory,
    name: str,
    backend: str,
) -> None:
    if backend not in _SYNC_SESSIONS:  # the sync baseline, once per backend
        _SYNC_SESSIONS[backend] = _session(SyncRunner(), fresh_store(backend))
    on_sync = _SYNC_SESSIONS[backend]
    runner = runner_named(request, tmp_path, name)

    got = _session(runner, fresh_store(backend))

    assert got["items"] and got["retrieved"], "the session memorised and retrieved something"
    assert [k for k, *_ in got["run_log"]] == ["evolve", "memorize", "retrieve"]
    assert got == on_sync


BOB_CHAT = [{"role": "user", "content": "I prefer green tea and I never drink coffee at work."}]
EVE_CHAT = [{"role": "user", "content": "I prefer espresso coffee with dark roast beans daily."}]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["sync", "burr", "temporal", "temporal_local"])
def test_the_boundary_and_pipeline_revisions_hold_on_every_runner_and_backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fresh_store: StoreFactory,
    name: str,
    backend: str,
) -> None:
    runner = runner_named(request, tmp_path, name)
    store = fresh_store(backend)
    with opened_service(runner, store) as service:
        for scope, chat in ((ALICE, CHAT), (BOB, BOB_CHAT), (EVE, EVE_CHAT)):
            service.memorize(scope, conversation=chat)
        acme = ScopeSelector(org_id="acme", user_id=ANY)

        anyone = service.retrieve(acme, "coffee tea peanuts")

        assert {i["scope"]["user_id"] for i in anyone.items} == {"alice", "bob"}
        assert "espresso" not in anyone.context  # eve's org is outside the boundary
        with pytest.raises(InvalidInputError, match="boundary field 'org_id' with ANY"):
            service.retrieve(ScopeSelector(org_id=ANY, user_id="eve"), "espresso")

        keep_one = step("rerank_again", "verify_rerank", "verify", ["ranked"], ["ranked"], keep=1)
        with pytest.raises(ConfigError, match="rerank_again"):
            service.insert_before("recall_items", keep_one)  # 'ranked' does not exist yet
        assert service.pipeline_revision == 1
        assert service.insert_after("verify_rerank", keep_one) == 2
        edited = service.retrieve(acme, "coffee tea peanuts")
        assert len(edited.items) == 1 < len(anyone.items)
        assert service.rollback(1) == 3
        rolled_back = service.retrieve(acme, "coffee tea peanuts")
        assert [i["text"] for i in rolled_back.items] == [i["text"] for i in anyone.items]
        runs = service.runs(3)
        assert [r["pipeline_revision"] for r in runs] == [3, 2, 1]
        assert "rerank_again" in [s["step_id"] for s in runs[1]["steps"]]
        assert {r["runner"] for r in runs} == {runner.name}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["sync", "burr", "temporal", "temporal_local"])
def test_a_failing_step_is_logged_with_its_cause_and_retried_on_every_runner_and_backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fresh_store: StoreFactory,
    name: str,
    backend: str,
) -> None:
    attempts: list[int] = []

    def flaky(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
        attempts.append(1)
        if spec.config.get("always_fail") or (spec.config.get("fail_once") and len(attempts) == 1):
            raise RuntimeError("disk on fire")
        return {}

    runner = runner_named(request, tmp_path, name)
    with opened_service(runner, fresh_store(backend), steps={"flaky": flaky}) as service:
        service.insert_after("route_intention", step("flaky", "flaky", "check", always_fail=True))
        with pytest.raises(PipelineRunError, match="disk on fire"):
            service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "coffee")
        failed = service.runs(1)[0]
        assert failed["runner"] == runner.name and failed["status"] == "failed"
        assert "flaky" in failed["error"] and "disk on fire" in failed["error"]
        assert failed["steps"][-1]["step_id"] == "flaky"
        assert "disk on fire" in failed["steps"][-1]["error"]
        assert failed["output"] is None

        attempts.clear()
        service.config("flaky", always_fail=None, fail_once=True, retries=1)
        service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "coffee")
        ok = service.runs(1)[0]
        assert ok["status"] == "ok" and len(attempts) == 2
        assert next(s for s in ok["steps"] if s["step_id"] == "flaky")["attempts"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["sync", "burr", "temporal", "temporal_local"])
def test_memorize_is_idempotent_and_merges_near_duplicates_on_every_runner_and_backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fresh_store: StoreFactory,
    name: str,
    backend: str,
) -> None:
    runner = runner_named(request, tmp_path, name)
    alice = {"org_id": ("acme",), "user_id": ("alice",)}
    with opened_service(runner, fresh_store(backend)) as service:
        first = service.memorize(ALICE, conversation=CHAT)
        stored = service.store.count_items(alice)

        again = service.memorize(ALICE, conversation=CHAT)

        assert again.duplicate and again.resource_id == first.resource_id
        assert again.items_added == again.items_merged == []
        assert service.store.count_items(alice) == stored == len(first.items_added)
        skipped = service.runs(1)[0]
        assert skipped["status"] == "skipped" and skipped["runner"] == runner.name
        assert skipped["output"] == {"duplicate_of": first.resource_id}

        # another statement of a stored fact merges into its item instead of adding one
        near = service.memorize(ALICE, content="I always prefer dark roast coffee in the mornings.")
        assert not near.duplicate and near.items_added == []
        (coffee,) = service.store.items_by_id(near.items_merged)
        assert "coffee" in coffee.text and coffee.version == 2
        assert [e["resource_id"] for e in coffee.evidence] == [first.resource_id, near.resource_id]
        assert service.store.count_items(alice) == stored

        # a new pipeline revision processes the same resource again: its items merge, not repeat
        service.config("extract_items", max_items=39)
        rerun = service.memorize(ALICE, conversation=CHAT)
        assert not rerun.duplicate and rerun.items_added == []
        assert sorted(rerun.items_merged) == sorted(first.items_added)
        assert service.store.count_items(alice) == stored
        assert {r["runner"] for r in service.runs()} == {runner.name}


def test_the_burr_runner_keeps_the_layers_run_state(tmp_path: Path) -> None:
    runner = BurrRunner(tmp_path)
    service = org_service(runner)

    service.memorize(ALICE, conversation=CHAT)

    (app_id,) = runner.app_ids("memorize")
    assert service.runs()[0]["runner_run_id"] == app_id  # the run log points at Burr's state
    saved = runner.persisted("memorize", app_id)
    assert saved is not None and saved.status == "completed"
    assert saved.state["pipeline_revision"] == service.pipeline_revision
