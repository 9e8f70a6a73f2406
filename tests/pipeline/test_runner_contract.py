"""The service against the runner contract (seed 004 §9): any runner, state JSON between steps.

Burr and Temporal persist the state between steps as JSON; this runner does the same round
trip after every step (and refuses anything JSON cannot carry), so a step that leaks a numpy
array or a row object into the state fails here, not only under those engines.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from memory_core.pipeline.contract import (
    ExecuteStep,
    Pipeline,
    RunOutcome,
    State,
    StepTiming,
)
from memory_core.pipeline.scopes import ANY, ScopeSelector
from tests.pipeline.conftest import ServiceFactory
from tests.pipeline.layer_kit import ALICE, BOB, CHAT


class JsonRoundTripRunner:
    name = "json-roundtrip"

    def __init__(self) -> None:
        self.snapshots: list[str] = []

    def run(self, pipeline: Pipeline, state: State, execute_step: ExecuteStep) -> RunOutcome:
        current = json.loads(json.dumps(state, allow_nan=False))
        timings: list[StepTiming] = []
        for step in pipeline.enabled_steps():
            started = time.perf_counter()
            produced = execute_step(step, current)
            snapshot = json.dumps({**current, **produced}, allow_nan=False)
            self.snapshots.append(snapshot)
            current = json.loads(snapshot)
            timings.append(StepTiming(step.step_id, (time.perf_counter() - started) * 1000))
        return RunOutcome(current, timings)


def test_every_pipeline_keeps_its_state_json_between_steps(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    runner = JsonRoundTripRunner()
    service = make_service(runner=runner)
    notes = tmp_path / "notes.txt"
    notes.write_text("The deploy window is Tuesday morning. We must never deploy on Fridays.")
    service.memorize(ALICE, conversation=CHAT)
    service.memorize(BOB, uri=str(notes))
    found = service.retrieve(ScopeSelector(org_id="acme", user_id=ANY), "deploy on Fridays")
    assert "Fridays" in found.items[0]["text"]
    assert service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "my goals").layer
    assert service.evolve(ALICE).diff is not None
    steps = sum(len(service.pipeline(n).enabled_steps()) for n in ("memorize", "retrieve"))
    assert len(runner.snapshots) >= steps
    assert {r["runner"] for r in service.runs()} == {"json-roundtrip"}


class Unserialisable(BaseModel):
    value: int


def test_the_round_trip_runner_catches_a_step_that_leaks_a_non_json_value(
    make_service: ServiceFactory,
) -> None:
    from memory_core.pipeline.editing import step

    def leaky(ctx, spec, state, llm):  # type: ignore[no-untyped-def]
        return {"leak": Unserialisable(value=1)}

    service = make_service(runner=JsonRoundTripRunner(), steps={"leaky": leaky})
    service.insert_after("route_intention", step("leaky", "leaky", "check"))
    with pytest.raises(TypeError, match="not JSON serializable"):
        service.retrieve(ScopeSelector(org_id="acme", user_id="alice"), "anything")
