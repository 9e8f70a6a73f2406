"""The per-section checks of seed 004 on every runner (sync, Burr, Temporal with activities and
with local activities) and every store (in-memory, a SQLite file, PostgreSQL + pgvector).

``pipeline/`` tests each section on the sync runner; this suite asks the same questions of the
layer when its steps run on Burr or Temporal: items keep their evidence, confidence, stability
and version (§2.2); a step's LLM profile is its own, else its role's, else ``default``, and the
async twin has the same API (§4); ``service_meta`` and the scope fields hold, and a run carries
the scope as its field values only (§5); the read-only queries read what the runner wrote and
run nothing (§6.2); the vector index is the store's, or none with a lexical fallback (§11);
no secret reaches the store, the run log, the runner's own state or the log output (§12).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio.client import Client

from memory_core.errors import InvalidInputError, ScopeMismatchError
from memory_core.pipeline.contract import ResumableRunner, Runner
from memory_core.pipeline.runners.burr_runner import BurrRunner
from memory_core.pipeline.scopes import ScopeSelector
from memory_core.pipeline.service import DDL_VERSION, AsyncMemoryService, MemoryService
from memory_core.storage.layer import InMemoryLayerStore
from tests.pipeline.layer_kit import ALICE, BOB, CATEGORIES, CHAT, OrgScope
from tests.pipeline_runners.conftest import StoreFactory, runner_named

ALICE_ONLY = ScopeSelector(org_id="acme", user_id="alice")
ALICE_FILTER = {"org_id": ("acme",), "user_id": ("alice",)}


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["sync", "burr", "temporal", "temporal_local"])
def runner(request: pytest.FixtureRequest, tmp_path: Path) -> Runner:
    """Each runner; the Temporal ones are the session's (one dev server, one worker each)."""
    return runner_named(request, tmp_path / "burr", request.param)


ServiceFactory = Callable[..., MemoryService]


@pytest.fixture
def location(backend: str, fresh_store: StoreFactory) -> Any:
    """This test's store: an in-memory instance, a SQLite file or a fresh PostgreSQL schema."""
    return fresh_store(backend)


@pytest.fixture
def make_service(runner: Runner, location: Any) -> Iterator[ServiceFactory]:
    """``make_service(**overrides)``: a service on this test's runner and store; called again,
    it reopens the same store. Only the stores are closed at the end: the Temporal runners
    are the session's."""
    opened: list[MemoryService] = []

    def factory(**overrides: Any) -> MemoryService:
        vector = overrides.pop("vector_index", None)
        storage: dict[str, Any] = {"metadata_store": overrides.pop("metadata_store", location)}
        if vector is not None:
            storage["vector_index"] = {"provider": vector}
        service = MemoryService.create(
            **{
                "scope_model": OrgScope,
                "categories": CATEGORIES,
                "storage_providers": storage,
                "boundary_fields": ["org_id"],
                "embedder": "hash:256",
                "runner": runner,
                **overrides,
            }
        )
        opened.append(service)
        return service

    yield factory
    for service in opened:
        if not isinstance(service.store, InMemoryLayerStore):
            service.store.close()


def _chat_text() -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in CHAT)


def _runners_state(runner: Runner, kind: str, runner_run_id: str) -> dict[str, Any]:
    """The state a durable runner keeps for a run (Burr's saved state, the Temporal
    workflow's input)."""
    assert isinstance(runner, ResumableRunner)
    state = runner.persisted_state(kind, runner_run_id)
    assert state is not None, (runner.name, runner_run_id)
    return dict(state)


# -- §2.2 items ------------------------------------------------------------------------------


def test_items_carry_evidence_confidence_stability_and_version_on_every_runner_and_backend(
    make_service: ServiceFactory, runner: Runner
) -> None:
    service = make_service()
    first = service.memorize(ALICE, conversation=CHAT)

    items = service.store.items(ALICE_FILTER)
    assert {i.item_id for i in items} == set(first.items_added)
    coffee = next(i for i in items if "coffee" in i.text)
    (evidence,) = coffee.evidence
    start, end = evidence["span"]
    assert _chat_text()[start:end] == coffee.text  # the span points into the resource
    assert evidence["resource_id"] == first.resource_id and evidence["turn"] == 0
    assert coffee.stability == "stable" and coffee.version == 1
    assert 0 < coffee.confidence <= 1
    assert not any("Anything else" in i.text for i in items)  # the assistant's filler

    # retrieve hands back the stored evidence and confidence
    found = service.retrieve(ALICE_ONLY, "peanut allergy")
    top = found.items[0]
    peanuts = next(i for i in items if i.item_id == top["item_id"])
    assert "peanuts" in top["text"] and top["scope"] == ALICE
    assert top["evidence"] == peanuts.evidence and top["confidence"] == peanuts.confidence

    # a restatement merges: the item's version goes up and it keeps both pieces of evidence
    near = service.memorize(ALICE, content="I always prefer dark roast coffee in the mornings.")
    (merged,) = service.store.items_by_id(near.items_merged)
    assert merged.item_id == coffee.item_id and merged.version == 2
    assert [e["resource_id"] for e in merged.evidence] == [first.resource_id, near.resource_id]
    assert merged.evidence[0] == evidence
    assert {r["runner"] for r in service.runs()} == {runner.name}


# -- §4.2 profiles ---------------------------------------------------------------------------


def _extractor(calls: list[str]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append("extractor")
        args = {
            "items": [
                {
                    "text": "Alice prefers dark roast coffee.",
                    "quote": "I always prefer dark roast coffee in the morning.",
                    "confidence": 0.9,
                    "stability": "stable",
                }
            ]
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(args))])

    return FunctionModel(respond)


def _reranker(name: str, calls: list[str]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(name)
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, json.dumps({"order": [0]}))]
        )

    return FunctionModel(respond)


def _profiles_used(run: dict[str, Any]) -> dict[str, str]:
    return {step_id: usage[0]["profile"] for step_id, usage in run["llm_usage"].items()}


def test_a_steps_profile_is_its_own_then_its_roles_then_default_on_every_runner_and_backend(
    make_service: ServiceFactory, runner: Runner
) -> None:
    calls: list[str] = []
    service = make_service(
        llm_providers={
            "default": {"model": "offline"},
            "extractor": {"model": _extractor(calls)},
            "role": {"model": _reranker("role", calls)},
            "step": {"model": _reranker("step", calls)},
            "local": {"model": "offline"},
        },
        role_profiles={"extract": "extractor", "verify": "role"},
    )
    # the sufficiency checks share the "verify" role: their own profile keeps them offline
    service.config("sufficiency_intention", llm_profile="local")
    service.config("sufficiency_category", llm_profile="local")

    memorized = service.memorize(ALICE, conversation=CHAT)

    assert calls == ["extractor"]  # extract's role profile, called by the runner's step
    (item,) = service.store.items_by_id(memorized.items_added)
    assert item.text == "Alice prefers dark roast coffee."
    used = _profiles_used(service.runs(1)[0])
    assert used["extract_items"] == "extractor"  # role
    assert used["categorize_items"] == used["infer_intention"] == "default"  # no role mapping

    calls.clear()
    service.retrieve(ALICE_ONLY, "coffee")
    assert calls == ["role"]
    used = _profiles_used(service.runs(1)[0])
    assert used["verify_rerank"] == "role"
    assert used["sufficiency_intention"] == used["sufficiency_category"] == "local"  # step

    service.config("verify_rerank", llm_profile="step")
    calls.clear()
    service.retrieve(ALICE_ONLY, "coffee")
    assert calls == ["step"]
    assert _profiles_used(service.runs(1)[0])["verify_rerank"] == "step"
    runs = service.runs(3)
    assert {r["runner"] for r in runs} == {runner.name}
    assert [r["pipeline_revision"] for r in runs] == [4, 3, 3]


# -- §4.1 the async twin ----------------------------------------------------------------------


def test_the_async_twin_has_the_same_api_on_every_runner_and_backend(
    runner: Runner, location: Any
) -> None:
    async def scenario() -> None:
        service = await AsyncMemoryService.create(
            scope_model=OrgScope,
            categories=CATEGORIES,
            storage_providers={"metadata_store": location},
            boundary_fields=["org_id"],
            embedder="hash:256",
            runner=runner,
        )
        try:
            # two memorize calls at once, each in its own thread, on the one runner
            alice, bob = await asyncio.gather(
                service.memorize(ALICE, conversation=CHAT),
                service.memorize(BOB, content="I prefer green tea and never drink coffee at work."),
            )
            assert alice.items_added and bob.items_added
            assert not set(alice.items_added) & set(bob.items_added)
            found = await service.retrieve(ALICE_ONLY, "peanuts")
            assert "peanuts" in found.items[0]["text"]
            assert {i["scope"]["user_id"] for i in found.items} == {"alice"}
            intention = await service.get_latest_intention(ALICE)
            assert intention is not None and intention["version"] == 1
            assert await service.config("build_context", budget_tokens=50) == 2
            assert (await service.diff(1))["retrieve"]
            assert await service.rollback(1) == 3
            listed = await service.list_categories(BOB)
            assert sum(c["item_count"] for c in listed) == len(bob.items_added)
            tea = await service.get_category(BOB, "preferences")
            assert any("green tea" in i["text"] for i in tea["items"])
            evolved = await service.evolve(ALICE)
            assert evolved.diff is not None and evolved.pipeline_revision == 3
            runs = await service.runs()
            assert sorted(r["kind"] for r in runs) == ["evolve", "memorize", "memorize", "retrieve"]
            assert {r["runner"] for r in runs} == {runner.name}
            assert {r["status"] for r in runs} == {"ok"}
            assert [r["revision"] for r in await service.revisions()] == [1, 2, 3]
        finally:
            if not isinstance(location, InMemoryLayerStore):
                await asyncio.to_thread(service.sync.store.close)

    asyncio.run(scenario())


# -- §5 service_meta and scope ----------------------------------------------------------------


class OtherScope(BaseModel):
    org_id: str
    project_id: str


def test_meta_and_scope_fields_hold_and_a_run_carries_no_scope_id_on_every_runner_and_backend(
    make_service: ServiceFactory, runner: Runner, backend: str
) -> None:
    service = make_service(
        llm_providers={
            "default": {"model": "offline"},
            "strong": {"model": "openai:gpt-4o", "api_key_env": "OPENAI_API_KEY"},
        }
    )
    service.memorize(ALICE, conversation=CHAT)
    assert service.config("build_context", budget_tokens=80) == 2

    meta = service.store.get_meta()  # as persisted, after a run and an edit
    assert meta == service.meta
    assert [f["name"] for f in meta["scope_fields"]] == ["org_id", "user_id"]
    assert meta["scope_schema_hash"] == service.scope_spec.schema_hash
    assert meta["ddl_version"] == DDL_VERSION and meta["pipeline_revision"] == 2
    assert len(meta["taxonomy_version"]) == 16
    assert meta["providers"]["llm"]["strong"]["api_key"] == {"env": "OPENAI_API_KEY"}
    assert meta["providers"]["storage"]["vector_index"] == {
        "provider": "pgvector" if backend == "postgres" else "bruteforce",
        "inferred": True,
    }

    # every stored row of the run is keyed by the scope's own values
    assert {tuple(sorted(i.scope.items())) for i in service.store.items(ALICE_FILTER)} == {
        tuple(sorted(ALICE.items()))
    }
    (run,) = [r for r in service.runs() if r["kind"] == "memorize"]
    assert run["scope_range"] == ALICE and run["runner"] == runner.name
    if runner.name != "sync":  # what Burr saved, what the Temporal workflow was started with
        state = _runners_state(runner, "memorize", run["runner_run_id"])
        assert state["scope"] == ALICE and state["pipeline_revision"] == 1
        assert [k for k in state if "scope" in k] == ["scope"]  # no internal scope id

    # a scope missing a field, or with a field the model lacks, is refused before any run
    logged = len(service.runs())
    with pytest.raises(InvalidInputError, match=r"missing \['user_id'\]"):
        service.memorize({"org_id": "acme"}, conversation=CHAT)
    with pytest.raises(InvalidInputError, match=r"unknown \['team'\]"):
        service.evolve({**ALICE, "team": "x"})
    assert len(service.runs()) == logged

    # the fields are locked: another scope model cannot open the store
    with pytest.raises(ScopeMismatchError, match=r"added \['project_id'\]"):
        make_service(scope_model=OtherScope)
    assert make_service().meta["scope_schema_hash"] == meta["scope_schema_hash"]


# -- §6.2 read-only queries -------------------------------------------------------------------


def _runner_runs(runner: Runner) -> int:
    """How many runs a Burr runner has saved (the other runners keep none to count here)."""
    if isinstance(runner, BurrRunner):
        return sum(len(runner.app_ids(kind)) for kind in ("memorize", "retrieve", "evolve"))
    return 0


def test_the_read_only_queries_read_what_the_runner_wrote_and_run_nothing(
    make_service: ServiceFactory, runner: Runner
) -> None:
    service = make_service()
    assert service.get_latest_intention(ALICE) is None
    service.memorize(ALICE, conversation=CHAT)
    logged, saved, revision = len(service.runs()), _runner_runs(runner), service.pipeline_revision

    listed = service.list_categories(ALICE, include_items=True)

    assert [c["category_key"] for c in listed] == ["preferences", "work", "health"]
    total = sum(c["item_count"] for c in listed)
    assert total == service.store.count_items(ALICE_FILTER) > 0
    filled = [c for c in listed if c["item_count"]]
    assert len(filled) >= 2
    for category in filled:
        assert category["summary"] and category["anchor_ids"]
        assert set(category["anchor_ids"]) <= {i["item_id"] for i in category["items"]}
    bare = service.list_categories(ALICE, include_summary=False)
    assert [c["item_count"] for c in bare] == [c["item_count"] for c in listed]
    assert all("summary" not in c and "items" not in c for c in bare)
    by_name = service.get_category(ALICE, filled[0]["name"])
    by_key = service.get_category(ALICE, filled[0]["category_key"])
    assert by_name == by_key and by_name["items"] == filled[0]["items"]
    assert service.list_categories(BOB) == [
        {"category_key": c["key"], "name": c["name"], "item_count": 0, "summary": "",
         "anchor_ids": []}
        for c in CATEGORIES
    ]  # fmt: skip
    first = service.get_latest_intention(ALICE)
    assert first is not None and first["version"] == 1
    assert any("billing migration" in g for g in first["goals"])
    assert any("legacy API" in c for c in first["constraints"])
    assert service.get_latest_intention(BOB) is None

    # the queries ran no pipeline, logged no run, made no revision
    assert len(service.runs()) == logged and _runner_runs(runner) == saved
    assert service.pipeline_revision == revision

    service.memorize(ALICE, content="We already finished the schema changes for billing.")
    second = service.get_latest_intention(ALICE)
    assert second is not None and second["version"] == 2
    assert any("schema changes" in p for p in second["progress"])
    assert second["goals"] == first["goals"]


# -- §11 the store's vector index -------------------------------------------------------------


def test_retrieve_uses_the_stores_vector_index_or_falls_back_without_one_on_every_runner(
    make_service: ServiceFactory, runner: Runner, backend: str, fresh_store: StoreFactory
) -> None:
    indexed = make_service()
    indexed.memorize(ALICE, conversation=CHAT)
    found = indexed.retrieve(ALICE_ONLY, "peanut allergy")
    assert found.fallbacks == []
    assert "peanuts" in found.items[0]["text"] and "vector" in found.items[0]["arms"]
    inferred = indexed.meta["providers"]["storage"]["vector_index"]
    assert inferred["provider"] == ("pgvector" if backend == "postgres" else "bruteforce")

    plain = make_service(metadata_store=fresh_store(backend), vector_index="none")
    plain.memorize(ALICE, conversation=CHAT)
    fallback = plain.retrieve(ALICE_ONLY, "peanut allergy")
    assert plain.meta["providers"]["storage"]["vector_index"]["provider"] == "none"
    assert fallback.fallbacks and "vector index unavailable" in fallback.fallbacks[0]
    assert "peanuts" in fallback.items[0]["text"]
    assert all("vector" not in i["arms"] for i in fallback.items)
    assert plain.runs(1)[0]["output"]["fallbacks"] == fallback.fallbacks
    assert {r["runner"] for r in [*indexed.runs(), *plain.runs()]} == {runner.name}


# -- §12 secrets ------------------------------------------------------------------------------


def _temporal_histories(address: str, workflow_ids: list[str]) -> str:
    """The full histories (inputs, results, every step's state) of the runs' workflows."""

    async def read() -> str:
        client = await Client.connect(address)
        parts = []
        for workflow_id in workflow_ids:
            history = await client.get_workflow_handle(workflow_id).fetch_history()
            # the events' wire bytes: payloads (JSON) appear as written, not base64-encoded
            raw = b"".join(event.SerializeToString() for event in history.events)
            parts.append(raw.decode("utf-8", "replace"))
        return "\n".join(parts)

    return asyncio.run(read())


def _burr_state(runner: BurrRunner) -> str:
    """Every byte of Burr's state file (and its write-ahead log)."""
    runner.close()  # checkpoints the WAL into the file
    files = [runner.state_path, runner.state_path.with_name(runner.state_path.name + "-wal")]
    return "\n".join(f.read_bytes().decode("utf-8", "replace") for f in files if f.exists())


def test_secrets_are_referenced_never_stored_or_logged_on_every_runner_and_backend(
    request: pytest.FixtureRequest,
    make_service: ServiceFactory,
    runner: Runner,
    location: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    calls: list[str] = []
    api_key = f"sk-live-{uuid.uuid4().hex}"
    monkeypatch.setenv("MEMOIR_SECTIONS_TEST_KEY", api_key)
    secrets = [api_key]
    store = location
    if isinstance(location, dict) and location["provider"] == "postgres":
        # the test server trusts local connections: the password is carried, not checked
        password = f"pw-{uuid.uuid4().hex}"
        url = location["url"].replace(
            "postgresql://postgres:@", f"postgresql://postgres:{password}@"
        )
        assert url != location["url"]
        store, secrets = {**location, "url": url}, [api_key, password]
    service = make_service(
        metadata_store=store,
        llm_providers={
            "default": {"model": "offline"},
            "strong": {"model": "openai:gpt-4o", "api_key_env": "MEMOIR_SECTIONS_TEST_KEY"},
            # a step runs on this one: its credential reference travels with the step's profile
            "keyed": {
                "model": _reranker("keyed", calls),
                "api_key_env": "MEMOIR_SECTIONS_TEST_KEY",
            },
        },
    )
    service.config("verify_rerank", llm_profile="keyed")
    service.memorize(ALICE, conversation=CHAT)
    service.retrieve(ALICE_ONLY, "peanut allergy")
    service.evolve(ALICE)

    assert calls == ["keyed"]
    assert service.runs(2)[1]["llm_usage"]["verify_rerank"][0]["profile"] == "keyed"
    meta = service.store.get_meta()
    for name in ("strong", "keyed"):
        assert meta["providers"]["llm"][name]["api_key"] == {"env": "MEMOIR_SECTIONS_TEST_KEY"}
    if len(secrets) == 2:
        assert "***" in meta["providers"]["storage"]["metadata_store"]["url"]
    runs = service.runs()
    kept = {  # everything the layer and its runner wrote down
        "service_meta": json.dumps(meta),
        "run log": json.dumps(runs),
        "log output": caplog.text,
    }
    if isinstance(runner, BurrRunner):
        kept["Burr state"] = _burr_state(runner)
    elif runner.name == "temporal":
        address = request.getfixturevalue("temporal_address")
        kept["Temporal history"] = _temporal_histories(address, [r["runner_run_id"] for r in runs])
    if runner.name != "sync":  # the runner's record holds the run (the chat), not the secret
        runner_kept = kept.get("Burr state") or kept["Temporal history"]
        assert "dark roast coffee" in runner_kept
    for where, text in kept.items():
        for secret in secrets:
            assert secret not in text, f"a secret is in the {where}"
