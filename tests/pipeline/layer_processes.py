"""A memorize in a process of its own, for the tests of evolve across processes: importable
by name, as a spawned process needs its target to be."""

from __future__ import annotations

from typing import Any

from memory_core.pipeline.contract import State, StepSpec
from memory_core.pipeline.service import MemoryService
from memory_core.pipeline.steps import LLMHandle, StepContext
from tests.pipeline.layer_kit import ALICE, CATEGORIES, OrgScope

__all__ = ["memorize_in_a_process", "open_gated"]

_GATE: dict[str, Any] = {}  # this process's events, set before its service runs a step


def _gate(ctx: StepContext, spec: StepSpec, state: State, llm: LLMHandle) -> State:
    """The first evolve to get here (in any process) waits for the test; later ones pass."""
    entries = _GATE["entries"]
    with entries.get_lock():
        first = entries.value == 0
        entries.value += 1
    if first:
        _GATE["entered"].set()
        assert _GATE["release"].wait(30), "the test never released the gate"
    return {}


def open_gated(location: dict[str, Any]) -> MemoryService:
    """A service on ``location`` that evolves ALICE after each memorize, through the gate
    step (a pipeline that uses it must be stored first)."""
    return MemoryService.create(
        scope_model=OrgScope,
        categories=CATEGORIES,
        storage_providers={"metadata_store": location},
        boundary_fields=["org_id"],
        embedder="hash:256",
        evolve_schedule={"every_memorizes": 1},
        steps={"gate": _gate},
    )


def memorize_in_a_process(
    location: dict[str, Any], fact: str, gate: dict[str, Any], results: Any
) -> None:
    """Memorizes ``fact`` for ALICE and puts the scheduled evolve's report on ``results``."""
    _GATE.update(gate)
    service = open_gated(location)
    try:
        results.put(service.memorize(ALICE, content=fact).scheduled_evolve)
    finally:
        service.close()
