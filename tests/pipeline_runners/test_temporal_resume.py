"""Stored Temporal runs outlive their worker: a memorize run whose first worker stops after a
few steps is finished by a new worker (a new service on the same store, a SQLite file or a
PostgreSQL schema, polling the same task queue), which rebuilds each remaining step from the stored revision; no completed step runs
again, and the result is the one of an uninterrupted run. An edit of the pipeline while the run
is in flight does not change the run's steps."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from resume_kit import (
    SHARED_BACKENDS,
    STOP_AFTER,
    StepLog,
    StoreSpec,
    audit,
    edit_in_flight,
    layer_service,
    logged_steps,
    stored,
    uninterrupted_memorize,
)
from temporalio import activity
from temporalio.client import Client

from memory_core.errors import NotFoundError, PipelineRunError
from memory_core.pipeline.runners.temporal_runner import TemporalRunner
from memory_core.pipeline.runners.temporal_workflow import (
    STORED_WORKFLOW_NAME,
    StoredRunInput,
    StoredRunResult,
)
from memory_core.pipeline.service import MemoryService
from memory_core.pipeline.steps import StepFn
from tests.pipeline.layer_kit import ALICE, CHAT
from tests.pipeline_runners.conftest import StoreFactory

WAIT_S = 60.0


def _stop_on_worker_shutdown(worker: str, log: StepLog) -> Callable[[str], None]:
    """After `STOP_AFTER` (run as an activity), wait until the worker is shut down, so the step
    completes on that worker and the next one is left to another."""

    def after_step(step_id: str) -> None:
        if step_id != STOP_AFTER:
            return
        log.stop_reached.set()
        activity.wait_for_worker_shutdown_sync(timeout=WAIT_S)
        if not activity.is_worker_shutdown():
            raise RuntimeError(f"the test never stopped {worker}")

    return after_step


@pytest.fixture(params=SHARED_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def uninterrupted(backend: str, fresh_store: StoreFactory) -> dict[str, Any]:
    return uninterrupted_memorize(fresh_store(backend))


@pytest.fixture
def store(backend: str, fresh_store: StoreFactory) -> StoreSpec:
    """The store both workers open (the same backend as `uninterrupted`)."""
    return dict(fresh_store(backend))


def _interrupted_memorize(
    store: StoreSpec,
    temporal_address: str,
    log: StepLog,
    *,
    while_in_flight: Any = None,
    new_steps: Mapping[str, StepFn] | None = None,
    caller_gone: bool = False,
) -> tuple[Any, MemoryService]:
    """memorize on worker-1 until `STOP_AFTER` completes, stop worker-1 (calling
    `while_in_flight(service_1)` first), and let a new service's worker-2 finish the run.
    Returns worker-1's memorize result (its client waited throughout) and service-2; with
    `caller_gone`, runner-1 is closed before worker-2 starts, and what its memorize call raised
    is returned instead."""
    queue = f"memoir-resume-{uuid.uuid4().hex[:8]}"
    runner_1 = TemporalRunner(address=temporal_address, task_queue=queue, identity="worker-1")
    service_1 = layer_service(
        store, runner_1, logged_steps(log, "worker-1", _stop_on_worker_shutdown("worker-1", log))
    )
    box: dict[str, Any] = {}

    def memorize() -> None:
        try:
            box["result"] = service_1.memorize(ALICE, conversation=CHAT)
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    starter = threading.Thread(target=memorize)
    starter.start()
    assert log.stop_reached.wait(WAIT_S), f"worker-1 never completed {STOP_AFTER}"
    if while_in_flight is not None:
        while_in_flight(service_1)
    runner_1.stop_worker()  # returns once STOP_AFTER's activity has completed on worker-1
    assert starter.is_alive(), "the run must still be in flight"
    if caller_gone:
        runner_1.close()
        starter.join(WAIT_S)
        assert "error" in box, "closing the runner must end the wait of its caller"

    runner_2 = TemporalRunner(address=temporal_address, task_queue=queue, identity="worker-2")
    steps_2 = {**logged_steps(log, "worker-2"), **(new_steps or {})}
    service_2 = layer_service(store, runner_2, steps_2)
    runner_2.start()
    if caller_gone:
        return box["error"], service_2
    starter.join(WAIT_S)
    runner_1.close()
    assert "error" not in box, box.get("error")
    assert "result" in box, "worker-2 did not finish the run in time"
    return box["result"], service_2


@pytest.mark.slow
def test_a_memorize_run_resumes_on_a_new_worker_without_repeating_a_step(
    store: StoreSpec, temporal_address: str, uninterrupted: dict[str, Any]
) -> None:
    log = StepLog()

    result, service_2 = _interrupted_memorize(store, temporal_address, log)

    try:
        order = [s.step_id for s in service_2.pipeline("memorize").enabled_steps()]
        gate = order.index(STOP_AFTER) + 1
        assert log.steps() == order, "every step ran exactly once, in order"
        assert log.steps("worker-1") == order[:gate]
        assert log.steps("worker-2") == order[gate:]
        assert (result.items_added, result.items_merged, result.categories) == uninterrupted[
            "result"
        ]
        assert stored(service_2) == {k: v for k, v in uninterrupted.items() if k != "result"}
        (run,) = service_2.runs()  # the run log, written by the service that started the run
        assert (run["status"], run["runner"]) == ("ok", "temporal")
        assert [(s["step_id"], s["attempts"]) for s in run["steps"]] == [(s, 1) for s in order]
        assert run["runner_run_id"].startswith("memoir-memorize-r1-")
        history = asyncio.run(_activity_history(temporal_address, run["runner_run_id"]))
        assert (
            history
            == [  # the plan is a local activity: a marker, not a task
                *(("memoir.run_stored_step", "worker-1") for _ in order[:gate]),
                *(("memoir.run_stored_step", "worker-2") for _ in order[gate:]),
            ]
        ), "Temporal scheduled each activity once, and each ran on the worker alive then"
    finally:
        service_2.close()


@pytest.mark.slow
def test_a_run_whose_caller_is_gone_is_finished_and_logged_by_resume(
    store: StoreSpec, temporal_address: str, uninterrupted: dict[str, Any]
) -> None:
    log = StepLog()

    error, service_2 = _interrupted_memorize(store, temporal_address, log, caller_gone=True)

    try:
        assert isinstance(error, PipelineRunError)
        workflow_id = error.details["runner_run_id"]
        assert f"service.resume('memorize', {workflow_id!r})" in str(error.hint)
        assert service_2.runs() == []  # the caller logged nothing

        entry = service_2.resume("memorize", workflow_id)

        order = [s.step_id for s in service_2.pipeline("memorize").enabled_steps()]
        assert log.steps() == order
        assert (entry["status"], entry["runner_run_id"]) == ("ok", workflow_id)
        assert [s["step_id"] for s in entry["steps"]] == order
        assert entry["input"] == {"resumed": workflow_id} and entry["pipeline_revision"] == 1
        assert stored(service_2) == {k: v for k, v in uninterrupted.items() if k != "result"}
        with pytest.raises(NotFoundError, match="saved no memorize run 'memoir-nope'"):
            service_2.resume("memorize", "memoir-nope")
    finally:
        service_2.close()


@pytest.mark.slow
def test_a_pipeline_edited_while_a_run_is_in_flight_leaves_the_run_on_its_revision(
    store: StoreSpec, temporal_address: str, uninterrupted: dict[str, Any]
) -> None:
    log = StepLog()

    result, service_2 = _interrupted_memorize(
        store, temporal_address, log, while_in_flight=edit_in_flight, new_steps={"audit": audit}
    )

    try:
        assert service_2.pipeline_revision == 3  # the two edits
        assert "audit" not in log.steps()
        assert "dedupe_merge" in log.steps("worker-2")
        assert "edited_in_flight" not in log.configs["dedupe_merge"]
        assert result.pipeline_revision == 1
        (run,) = service_2.runs()
        assert run["pipeline_revision"] == 1 and "audit" not in [s["step_id"] for s in run["steps"]]
        assert stored(service_2) == {k: v for k, v in uninterrupted.items() if k != "result"}

        service_2.memorize(ALICE, content="I drink green tea.")  # a new run: revision 3

        latest = service_2.runs()[0]
        assert latest["pipeline_revision"] == 3
        assert latest["steps"][-1]["step_id"] == "audit"
        assert log.configs["dedupe_merge"]["edited_in_flight"] is True
    finally:
        service_2.close()


async def _activity_history(address: str, workflow_id: str) -> list[tuple[str, str]]:
    """(activity type, worker identity) of each activity the workflow scheduled, in order."""
    client = await Client.connect(address)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    scheduled: dict[int, str] = {}
    ran: list[tuple[str, str]] = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
        elif event.HasField("activity_task_started_event_attributes"):
            started = event.activity_task_started_event_attributes
            ran.append((scheduled.pop(started.scheduled_event_id), started.identity))
    assert not scheduled, f"activities scheduled but never started: {scheduled}"
    return ran


async def _start_stored(address: str, queue: str, run: StoredRunInput) -> StoredRunResult:
    client = await Client.connect(address)
    result: StoredRunResult = await client.execute_workflow(
        STORED_WORKFLOW_NAME,
        run,
        id=f"memoir-test-{uuid.uuid4().hex}",
        task_queue=queue,
        result_type=StoredRunResult,
    )
    return result


def test_a_stored_run_with_a_scope_the_store_does_not_have_runs_no_step(
    tmp_path: Path, temporal_address: str
) -> None:
    log = StepLog()
    runner = TemporalRunner(address=temporal_address, sandboxed=False).start()
    service = layer_service(tmp_path / "layer.db", runner, logged_steps(log, "worker"))
    try:
        forged = {"org_id": "acme", "user_id": "alice", "metadata_store": "/tmp/other.db"}
        run = StoredRunInput(
            "memorize", 1, {"scope": forged, "pipeline_revision": 1, "options": {}}
        )

        result = asyncio.run(_start_stored(temporal_address, runner.task_queue, run))

        assert (result.failed_step, result.error_type) == ("ingest_resource", "InvalidInputError")
        assert "unknown ['metadata_store']" in (result.error_message or "")
        assert log.calls == []
    finally:
        service.close()


def test_a_stored_run_of_a_revision_the_store_does_not_have_is_refused(
    tmp_path: Path, temporal_address: str
) -> None:
    runner = TemporalRunner(address=temporal_address, sandboxed=False).start()
    service = layer_service(tmp_path / "layer.db", runner)
    try:
        outcome = runner.run_stored("memorize", 7, {"scope": ALICE, "pipeline_revision": 7})

        assert outcome.status == "failed" and outcome.timings == []
        assert outcome.error is not None
        assert "revision 7 cannot run: no pipeline revision 7" in outcome.error
    finally:
        service.close()
