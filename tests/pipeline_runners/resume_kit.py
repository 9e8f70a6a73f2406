"""A memory layer for the resume tests (on a SQLite file or a PostgreSQL schema: stores two
processes can open, which the in-memory store is not), its step calls logged, and what a
memorize leaves in the store (to compare an interrupted run with an uninterrupted one)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity

from memory_core.pipeline.contract import Runner, StepSpec, SyncRunner
from memory_core.pipeline.editing import step
from memory_core.pipeline.service import MemoryService
from memory_core.pipeline.steps import BUILTIN_STEPS, StepFn
from tests.pipeline.layer_kit import ALICE, CATEGORIES, CHAT, OrgScope

SHARED_BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
"""The backends a second service (or process) can reopen: a file, a server. In-memory cannot."""

StoreSpec = Path | Mapping[str, Any]
"""A SQLite file, or a ``metadata_store`` mapping (``fresh_store(backend)``)."""

STOP_AFTER = "extract_items"
"""The first process or worker stops once this step (the third of memorize) has completed."""


@dataclass
class StepLog:
    """Every step call of every service, as (worker, step_id), in order."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The config each step last ran with, by step id."""
    stop_reached: threading.Event = field(default_factory=threading.Event)

    def steps(self, worker: str | None = None) -> list[str]:
        return [s for w, s in self.calls if worker is None or w == worker]


def logged_steps(
    log: StepLog, worker: str, after_step: Callable[[str], None] | None = None
) -> dict[str, StepFn]:
    """The built-in steps, each noting its call in `log`, then calling `after_step(step_id)`."""

    def logged(fn: StepFn) -> StepFn:
        def run(ctx: Any, spec: StepSpec, state: Any, llm: Any) -> Mapping[str, Any]:
            produced = fn(ctx, spec, state, llm)
            log.calls.append((worker, spec.step_id))
            log.configs[spec.step_id] = dict(spec.config)
            if after_step is not None:
                after_step(spec.step_id)
            return produced

        return run

    return {impl: logged(fn) for impl, fn in BUILTIN_STEPS.items()}


def edit_in_flight(service: MemoryService) -> None:
    """Two edits of memorize after `STOP_AFTER`: a new last step, and a config change."""
    service.register_step("audit", audit)
    service.insert_after("persist_index", step("audit", "audit", "check"))
    service.config("dedupe_merge", edited_in_flight=True)


def audit(ctx: Any, spec: StepSpec, state: Any, llm: Any) -> Mapping[str, Any]:
    """A step a test inserts while a run is in flight."""
    return {"audited": True}


def metadata_store(store: StoreSpec) -> dict[str, Any]:
    """The ``metadata_store`` provider of `store` (JSON-able, for a subprocess's argv)."""
    if isinstance(store, Path):
        return {"provider": "sqlite", "path": str(store)}
    return dict(store)


def layer_service(
    store: StoreSpec, runner: Runner, steps: Mapping[str, StepFn] | None = None
) -> MemoryService:
    return MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": metadata_store(store)},
        boundary_fields=["org_id"],
        embedder="hash:256",
        runner=runner,
        steps=steps,
        clock=lambda: 1_760_000_000.0,
    )


def stored(service: MemoryService) -> dict[str, Any]:
    """What memorize left in the store for ALICE: items, categories, intention."""
    scope = {k: (v,) for k, v in ALICE.items()}
    return {
        "items": sorted((i.item_id, i.text, i.category_key) for i in service.store.items(scope)),
        "categories": service.list_categories(ALICE),
        "intention": service.get_latest_intention(ALICE),
    }


def uninterrupted_memorize(store: StoreSpec) -> dict[str, Any]:
    """The reference: ALICE's CHAT memorized in one go by the sync runner on a fresh store."""
    service = layer_service(store, SyncRunner())
    result = service.memorize(ALICE, conversation=CHAT)
    left = {"result": (result.items_added, result.items_merged, result.categories)}
    left.update(stored(service))
    service.close()
    return left


GATE_WAIT_S = 90.0


def gate(ctx: Any, spec: StepSpec, state: Any, llm: Any) -> Mapping[str, Any]:
    """A step that holds its run until the test releases it: it notes `<pid> start` in
    `<folder>/gate.log` (and its workflow id in `<folder>/workflow_id`), waits (bounded) for
    `<folder>/release`, then notes `<pid> done`, its one effect."""
    folder = Path(spec.config["folder"])
    pid = os.getpid()
    (folder / "workflow_id").write_text(str(activity.info().workflow_id))
    with (folder / "gate.log").open("a") as log:
        log.write(f"{pid} start\n")
    deadline = time.monotonic() + GATE_WAIT_S
    while not (folder / "release").exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the test never released the gate in {folder}")
        time.sleep(0.05)
    with (folder / "gate.log").open("a") as log:
        log.write(f"{pid} done\n")
    return {}
