"""The memory layer's memorize / retrieve / evolve give the same results and the same run logs
on every runner, on each of the three stores (in-memory, a SQLite file, PostgreSQL + pgvector):
one suite over runners x backends, each compared with the sync runner on the same backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest
from store_testkit import start_pgserver

from memory_core.pipeline.contract import Runner, SyncRunner
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.scopes import ScopeSelector
from memory_core.pipeline.service import MemoryService
from memory_core.storage.layer import InMemoryLayerStore
from tests.pipeline.conftest import fresh_pg_schema
from tests.pipeline.layer_kit import ALICE, CATEGORIES, CHAT, OrgScope

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(autouse=True)
def no_real_model_requests() -> Iterator[None]:
    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    yield
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous


@pytest.fixture(scope="module")
def pg_admin_url() -> str:
    return start_pgserver()


StoreFactory = Callable[[str], Any]


@pytest.fixture
def fresh_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> StoreFactory:
    """``fresh_store(backend)``: the ``metadata_store`` of a new, empty store of that backend."""

    def factory(backend: str) -> Any:
        if backend == "postgres":
            url = fresh_pg_schema(request.getfixturevalue("pg_admin_url"))
            return {"provider": "postgres", "url": url}
        if backend == "sqlite":
            return {"provider": "sqlite", "path": str(tmp_path_factory.mktemp("s") / "layer.db")}
        return InMemoryLayerStore()

    return factory


def _service(runner: Runner, metadata_store: Any = None) -> MemoryService:
    return MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": metadata_store or InMemoryLayerStore()},
        boundary_fields=["org_id"],
        embedder="hash:256",
        runner=runner,
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
    service = _service(runner, metadata_store)
    try:
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
    finally:
        if not isinstance(metadata_store, InMemoryLayerStore | None):
            service.close()
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
    runner: Runner = (
        BurrRunner(tmp_path) if name == "burr" else request.getfixturevalue(f"{name}_runner")
    )

    got = _session(runner, fresh_store(backend))

    assert got["items"] and got["retrieved"], "the session memorised and retrieved something"
    assert [k for k, *_ in got["run_log"]] == ["evolve", "memorize", "retrieve"]
    assert got == on_sync


def test_the_burr_runner_keeps_the_layers_run_state(tmp_path: Path) -> None:
    runner = BurrRunner(tmp_path)
    service = _service(runner)

    service.memorize(ALICE, conversation=CHAT)

    (app_id,) = runner.app_ids("memorize")
    assert service.runs()[0]["runner_run_id"] == app_id  # the run log points at Burr's state
    saved = runner.persisted("memorize", app_id)
    assert saved is not None and saved.status == "completed"
    assert saved.state["pipeline_revision"] == service.pipeline_revision
