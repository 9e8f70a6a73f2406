"""A Temporal worker killed (SIGKILL) in the middle of a stored step: the step's heartbeats stop,
the server fails its attempt after the step's heartbeat timeout, not its start-to-close
timeout, and the workflow schedules the step again although its `retries` is 0 (a lost worker
is not the step's own error). A new worker on the same store and task queue finishes the run;
the step's attempts never overlap, and every step's effects are stored once. The killed-worker
tests run on a SQLite file and a PostgreSQL schema (worker-1 is another process: an in-memory
store could not be shared)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from resume_kit import (
    SHARED_BACKENDS,
    STOP_AFTER,
    StepLog,
    gate,
    layer_service,
    logged_steps,
    metadata_store,
    stored,
    uninterrupted_memorize,
)
from temporalio.client import Client
from temporalio.exceptions import TimeoutType

from memory_core.pipeline.contract import SyncRunner
from memory_core.pipeline.editing import step
from memory_core.pipeline.runners.temporal_runner import TemporalRunner
from memory_core.pipeline.runners.temporal_workflow import RUN_STORED_STEP_ACTIVITY
from tests.pipeline.layer_kit import ALICE, CHAT
from tests.pipeline_runners.conftest import StoreFactory

REPO = Path(__file__).resolve().parents[2]
HEARTBEAT_S = 2.0
GATE_TIMEOUT_S = 300.0  # the gate's start-to-close timeout: the run must not wait for it
FINISHED_WITHIN_S = 40.0
WAIT_S = 90.0

# worker-1: memorize on the Temporal runner (steps as activities) until the gate holds the run.
WORKER_1 = """
import json, sys
from pathlib import Path
from resume_kit import StepLog, gate, layer_service, logged_steps
from memory_core.pipeline.runners.temporal_runner import TemporalRunner
from tests.pipeline.layer_kit import ALICE, CHAT

folder, address, queue = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
store = json.loads(sys.argv[4])
local = sys.argv[5:] == ["local"]
runner = TemporalRunner(
    address=address, task_queue=queue, identity="worker-1", local_activities=local
)
steps = {**logged_steps(StepLog(), "worker-1"), "gate": gate}
service = layer_service(store, runner, steps)
service.memorize(ALICE, conversation=CHAT)
"""


def _insert_gate(folder: Path, store: Any) -> None:
    """Revision 2 of memorize: the gate after `STOP_AFTER`, with a 2 s heartbeat timeout."""
    service = layer_service(store, SyncRunner(), {"gate": gate})
    try:
        service.insert_after(
            STOP_AFTER,
            step("gate", "gate", "check", folder=str(folder), heartbeat_timeout_s=HEARTBEAT_S),
        )
        service.config("gate", timeout_s=GATE_TIMEOUT_S)
    finally:
        service.close()


def _wait_for(condition: Any, what: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"worker-1 exited ({process.returncode}) before {what}")
        assert time.monotonic() < deadline, f"worker-1 never reached {what}"
        time.sleep(0.05)


def _gate_log(folder: Path) -> list[str]:
    path = folder / "gate.log"
    return path.read_text().splitlines() if path.exists() else []


def _kill_worker_1_in_the_gate(
    folder: Path, store: Any, address: str, queue: str, *, local: bool = False
) -> tuple[str, int]:
    """Starts worker-1 in a subprocess, SIGKILLs it once its memorize is held in the gate, and
    releases the gate for the next attempt. Returns the run's workflow id and worker-1's pid."""
    script = folder / "worker_1.py"
    script.write_text(WORKER_1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMOIR_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests" / "pipeline_runners")])
    worker_1 = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(folder),
            address,
            queue,
            json.dumps(metadata_store(store)),
            *(["local"] if local else []),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        _wait_for(lambda: _gate_log(folder) == [f"{worker_1.pid} start"], "the gate", worker_1)
    finally:
        worker_1.send_signal(signal.SIGKILL)  # no graceful stop, no failure reported
        worker_1.wait(timeout=10)
    (folder / "release").touch()  # the next attempt of the gate passes at once
    return (folder / "workflow_id").read_text(), worker_1.pid


def _resume_on_worker_2(
    store: Any,
    address: str,
    queue: str,
    workflow_id: str,
    log: StepLog,
    *,
    local: bool = False,
) -> tuple[dict[str, Any], Any]:
    """A new service on the same store with worker-2 on the same queue resumes the run (bounded
    wait). Returns what resume returned or raised, and the service."""
    runner_2 = TemporalRunner(
        address=address, task_queue=queue, identity="worker-2", local_activities=local
    )
    service_2 = layer_service(store, runner_2, {**logged_steps(log, "worker-2"), "gate": gate})
    box: dict[str, Any] = {}

    def resume() -> None:
        try:
            box["entry"] = service_2.resume("memorize", workflow_id)
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    resumer = threading.Thread(target=resume, daemon=True)
    resumer.start()
    resumer.join(FINISHED_WITHIN_S)
    return box, service_2


@pytest.mark.slow
@pytest.mark.parametrize("backend", SHARED_BACKENDS)
def test_a_step_whose_worker_was_killed_is_run_again_on_a_new_worker_within_seconds(
    tmp_path: Path, temporal_address: str, backend: str, fresh_store: StoreFactory
) -> None:
    reference = uninterrupted_memorize(fresh_store(backend))
    store = fresh_store(backend)
    _insert_gate(tmp_path, store)
    queue = f"memoir-killed-{uuid.uuid4().hex[:8]}"
    workflow_id, worker_1_pid = _kill_worker_1_in_the_gate(tmp_path, store, temporal_address, queue)
    killed_at = time.monotonic()
    log = StepLog()

    box, service_2 = _resume_on_worker_2(store, temporal_address, queue, workflow_id, log)
    finished_after_s = time.monotonic() - killed_at

    try:
        assert "error" not in box, box.get("error")
        assert "entry" in box, (
            f"the run did not finish within {FINISHED_WITHIN_S:g} s of the kill "
            f"(the gate's start-to-close timeout is {GATE_TIMEOUT_S:g} s)"
        )
        assert finished_after_s < FINISHED_WITHIN_S
        entry = box["entry"]
        order = [s.step_id for s in service_2.pipeline("memorize").enabled_steps()]
        after_gate = order[order.index("gate") + 1 :]
        assert (entry["status"], entry["pipeline_revision"]) == (
            "ok",
            3,
        )  # the insert and the config edit
        assert log.steps("worker-2") == after_gate, "the steps before the gate did not run again"
        me = os.getpid()
        assert _gate_log(tmp_path) == [f"{worker_1_pid} start", f"{me} start", f"{me} done"]
        attempts = {s["step_id"]: s["attempts"] for s in entry["steps"]}
        assert attempts["gate"] == 2, "the attempt lost with worker-1, then worker-2's"
        assert all(attempts[s] == 1 for s in order if s != "gate")
        assert stored(service_2) == {k: v for k, v in reference.items() if k != "result"}

        gate_attempts = asyncio.run(_gate_attempts(temporal_address, workflow_id, order))
        assert gate_attempts == [("worker-1", "heartbeat timeout"), ("worker-2", "completed")]
    finally:
        service_2.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", SHARED_BACKENDS)
def test_with_local_activities_a_killed_workers_run_is_replayed_with_its_unrecorded_steps(
    tmp_path: Path, temporal_address: str, backend: str, fresh_store: StoreFactory
) -> None:
    """Local activities cannot heartbeat: the new worker takes the run once the killed worker's
    workflow task times out, and runs again every step whose result the killed worker had not
    yet recorded in the history (here every step: they ran within one workflow task)."""
    reference = uninterrupted_memorize(fresh_store(backend))
    store = fresh_store(backend)
    _insert_gate(tmp_path, store)
    queue = f"memoir-killed-local-{uuid.uuid4().hex[:8]}"
    workflow_id, worker_1_pid = _kill_worker_1_in_the_gate(
        tmp_path, store, temporal_address, queue, local=True
    )
    log = StepLog()

    box, service_2 = _resume_on_worker_2(
        store, temporal_address, queue, workflow_id, log, local=True
    )

    try:
        assert "error" not in box, box.get("error")
        assert "entry" in box, f"the run did not finish within {FINISHED_WITHIN_S:g} s"
        assert box["entry"]["status"] == "ok"
        order = [s.step_id for s in service_2.pipeline("memorize").enabled_steps()]
        assert log.steps("worker-2") == [s for s in order if s != "gate"], (
            "the steps worker-1 completed before the kill ran again on worker-2"
        )
        me = os.getpid()
        assert _gate_log(tmp_path) == [f"{worker_1_pid} start", f"{me} start", f"{me} done"]
        assert stored(service_2) == {k: v for k, v in reference.items() if k != "result"}
    finally:
        service_2.close()


@pytest.mark.slow
def test_a_live_worker_keeps_a_step_longer_than_its_heartbeat_timeout_in_one_attempt(
    tmp_path: Path, temporal_address: str
) -> None:
    runner = TemporalRunner(address=temporal_address, sandboxed=False, heartbeat_timeout_s=1.0)
    service = layer_service(tmp_path / "layer.db", runner, {"gate": gate})
    try:
        service.insert_after(STOP_AFTER, step("gate", "gate", "check", folder=str(tmp_path)))
        box: dict[str, Any] = {}
        memorizing = threading.Thread(
            target=lambda: box.update(result=service.memorize(ALICE, conversation=CHAT)),
            daemon=True,
        )
        memorizing.start()
        deadline = time.monotonic() + WAIT_S
        while _gate_log(tmp_path) != [f"{os.getpid()} start"]:
            assert time.monotonic() < deadline, "the gate never started"
            time.sleep(0.05)
        released = threading.Event()
        # Hold the step for 4 heartbeat timeouts: only its heartbeats keep the attempt alive.
        assert not released.wait(4.0)
        (tmp_path / "release").touch()
        memorizing.join(WAIT_S)

        assert "result" in box, "the memorize did not finish"
        (run,) = service.runs()
        assert run["status"] == "ok"
        assert {s["step_id"]: s["attempts"] for s in run["steps"]}["gate"] == 1
        assert _gate_log(tmp_path) == [f"{os.getpid()} start", f"{os.getpid()} done"]
    finally:
        service.close()


def test_a_heartbeat_timeout_that_is_not_a_positive_number_is_refused_before_any_step(
    tmp_path: Path, temporal_address: str
) -> None:
    log = StepLog()
    runner = TemporalRunner(address=temporal_address, sandboxed=False)
    service = layer_service(tmp_path / "layer.db", runner, logged_steps(log, "worker"))
    try:
        service.config("extract_items", heartbeat_timeout_s="soon")

        outcome = runner.run_stored("memorize", 2, {"scope": ALICE, "pipeline_revision": 2})

        assert outcome.status == "failed" and log.calls == []
        assert "step 'extract_items' has heartbeat_timeout_s = 'soon'" in (outcome.error or "")
    finally:
        service.close()


async def _gate_attempts(address: str, workflow_id: str, order: list[str]) -> list[tuple[str, str]]:
    """For each scheduling of the gate's activity, in order: the worker that started it and how
    it closed; asserting that each scheduling follows the close of the one before (no two
    attempts of the gate were ever open at once)."""
    client = await Client.connect(address)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    scheduled: list[int] = []
    started_by: dict[int, str] = {}
    closed: dict[int, tuple[int, str]] = {}  # scheduling -> (close event id, how)
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            assert attrs.activity_type.name == RUN_STORED_STEP_ACTIVITY
            scheduled.append(event.event_id)
        elif event.HasField("activity_task_started_event_attributes"):
            attrs_s = event.activity_task_started_event_attributes
            started_by[attrs_s.scheduled_event_id] = attrs_s.identity
        elif event.HasField("activity_task_completed_event_attributes"):
            done = event.activity_task_completed_event_attributes
            closed[done.scheduled_event_id] = (event.event_id, "completed")
        elif event.HasField("activity_task_timed_out_event_attributes"):
            timed_out = event.activity_task_timed_out_event_attributes
            kind = timed_out.failure.timeout_failure_info.timeout_type
            how = "heartbeat timeout" if kind == TimeoutType.HEARTBEAT else f"timeout {kind}"
            closed[timed_out.scheduled_event_id] = (event.event_id, how)
    assert len(scheduled) == len(order) + 1, "one scheduling per step, two for the gate"
    gate_index = order.index("gate")
    first, second = scheduled[gate_index : gate_index + 2]
    assert closed[first][0] < second, "the gate was scheduled again only once its attempt closed"
    return [(started_by[s], closed[s][1]) for s in (first, second)]
