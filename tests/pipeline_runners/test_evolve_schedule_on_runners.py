"""The internal evolve schedule (seed 004 §6.1) on the durable runners: the scheduled evolve
runs through the service's own runner (Burr, Temporal) and is logged as that runner's evolve
run, with the runner's run id, on the in-memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.layer_kit import ALICE
from tests.pipeline_runners.conftest import BACKENDS, StoreFactory, opened_service, runner_named


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["burr", "temporal"])
def test_a_scheduled_evolve_runs_on_the_services_runner_and_is_logged_as_its_run(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fresh_store: StoreFactory,
    name: str,
    backend: str,
) -> None:
    runner = runner_named(request, tmp_path, name)
    store: Any = fresh_store(backend)
    with opened_service(runner, store, evolve_schedule={"every_memorizes": 2}) as service:
        first = service.memorize(ALICE, content="I always prefer dark roast coffee.")
        assert first.scheduled_evolve is not None
        assert first.scheduled_evolve["status"] == "not_due"
        second = service.memorize(ALICE, content="We must ship the billing migration by May.")
        assert second.scheduled_evolve is not None
        assert second.scheduled_evolve["status"] == "ok", second.scheduled_evolve
        evolve = service.runs(1)[0]
        assert evolve["run_id"] == second.scheduled_evolve["run_id"]
        assert (evolve["kind"], evolve["status"], evolve["runner"]) == ("evolve", "ok", name)
        assert evolve["runner_run_id"]  # the engine's own id, as for an external evolve
        assert evolve["input"]["trigger"] == "schedule"
        assert [s["step_id"] for s in evolve["steps"]] == [
            s.step_id for s in service.pipeline("evolve").enabled_steps()
        ]
