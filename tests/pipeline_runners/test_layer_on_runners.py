"""The memory layer's memorize / retrieve / evolve give the same results on every runner."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest

from memory_core.pipeline.contract import Runner, SyncRunner
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.scopes import ScopeSelector
from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer import InMemoryLayerStore
from tests.pipeline.layer_kit import ALICE, CATEGORIES, CHAT, OrgScope


@pytest.fixture(autouse=True)
def no_real_model_requests() -> Iterator[None]:
    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    yield
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous


def _service(runner: Runner) -> MemoryService:
    return MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": InMemoryLayerStore()},
        boundary_fields=["org_id"],
        embedder="hash:256",
        runner=runner,
    )


def _session(runner: Runner) -> dict[str, Any]:
    """memorize, retrieve and evolve on a fresh service; what each returned, without ids."""
    service = _service(runner)
    memorized = service.memorize(ALICE, conversation=CHAT)
    texts = {
        i.item_id: i.text for i in service.store.items({"org_id": ("acme",), "user_id": ("alice",)})
    }
    retrieved = service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "peanut allergy")
    evolved = service.evolve(ALICE)
    runs = service.runs()
    return {
        "items": sorted(texts[i] for i in memorized.items_added),
        "categories": sorted(memorized.categories),
        "intention_version": memorized.intention_version,
        "layer": retrieved.layer,
        "retrieved": [item["text"] for item in retrieved.items],
        "context": retrieved.context,
        "evolve_keys": sorted(evolved.diff),
        "run_log": sorted(
            (run["kind"], run["runner"], run["status"], tuple(s["step_id"] for s in run["steps"]))
            for run in runs
        ),
    }


@pytest.fixture(scope="module")
def on_sync() -> dict[str, Any]:
    return _session(SyncRunner())


@pytest.mark.parametrize("name", ["burr", "temporal", "temporal_local"])
def test_the_layer_behaves_the_same_on_every_runner(
    request: pytest.FixtureRequest, tmp_path: Path, on_sync: dict[str, Any], name: str
) -> None:
    runner: Runner = (
        BurrRunner(tmp_path) if name == "burr" else request.getfixturevalue(f"{name}_runner")
    )

    got = _session(runner)

    assert got["items"] and got["retrieved"], "the session memorised and retrieved something"
    expected_log = [(k, runner.name, s, steps) for k, _, s, steps in on_sync["run_log"]]
    assert got["run_log"] == expected_log
    assert {k: v for k, v in got.items() if k != "run_log"} == {
        k: v for k, v in on_sync.items() if k != "run_log"
    }


def test_the_burr_runner_keeps_the_layers_run_state(tmp_path: Path) -> None:
    runner = BurrRunner(tmp_path)
    service = _service(runner)

    service.memorize(ALICE, conversation=CHAT)

    (app_id,) = runner.app_ids("memorize")
    assert service.runs()[0]["runner_run_id"] == app_id  # the run log points at Burr's state
    saved = runner.persisted("memorize", app_id)
    assert saved is not None and saved.status == "completed"
    assert saved.state["pipeline_revision"] == service.pipeline_revision
