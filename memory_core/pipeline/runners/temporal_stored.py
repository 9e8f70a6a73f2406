"""The Temporal runner's stored runs: the activities that rebuild a step from the stored
revision with the attached service, and the translations of a stored run's workflow (its input
state, its result) for `TemporalRunner`.

A stored step is addressed by (pipeline, revision, step id) only; what it runs with, the store
and the providers, is the attached service's, so any worker with a service on the same store can
run it.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.pipeline.contract import (
    PipelineName,
    RunOutcome,
    State,
    StepSource,
    StepSpec,
    StepTiming,
)
from memory_core.pipeline.runners.temporal_workflow import (
    PLAN_STORED_ACTIVITY,
    RUN_STORED_STEP_ACTIVITY,
    STORED_WORKFLOW_NAME,
    StepDone,
    StoredRunInput,
    StoredRunResult,
    StoredStep,
)

HEARTBEAT_CONFIG_KEY = "heartbeat_timeout_s"
"""The step config key that sets a stored step's heartbeat timeout (seconds)."""

__all__ = ["HEARTBEAT_CONFIG_KEY", "StoredActivities", "stored_input_state", "stored_outcome"]


class StoredActivities:
    """The stored-run activities of one worker, run with the service attached to it."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.source: StepSource | None = None

    @activity.defn(name=PLAN_STORED_ACTIVITY)
    def plan(self, name: PipelineName, revision: int) -> list[StoredStep]:
        source = self._attached()
        try:
            pipeline = source.stored_pipeline(name, revision)
        except (NotFoundError, InvalidInputError) as exc:  # no retry can fix these
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
        return [
            StoredStep(step.step_id, step.retries, step.timeout_s, _heartbeat_timeout_s(step))
            for step in pipeline.enabled_steps()
        ]

    @activity.defn(name=RUN_STORED_STEP_ACTIVITY)
    def run_step(
        self, name: PipelineName, revision: int, step_id: str, state: dict[str, Any]
    ) -> StepDone:
        source = self._attached()
        started = time.perf_counter()
        try:
            with _heartbeating():
                produced = dict(source.run_stored_step(name, revision, step_id, state))
        except (NotFoundError, InvalidInputError) as exc:  # the run's address or scope is wrong
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
        ms = (time.perf_counter() - started) * 1000
        return StepDone(produced, ms, activity.info().attempt)

    def _attached(self) -> StepSource:
        if self.source is None:
            raise ApplicationError(
                f"the worker {self.identity!r} has no service attached to run stored steps",
                type="ConfigError",
                non_retryable=True,
            )
        return self.source


def _heartbeat_timeout_s(step: StepSpec) -> float | None:
    """The step's config `heartbeat_timeout_s` (a positive number of seconds), if set.

    Raises:
        InvalidInputError: a value that is not a positive number.
    """
    value = step.config.get(HEARTBEAT_CONFIG_KEY)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InvalidInputError(
            f"step {step.step_id!r} has {HEARTBEAT_CONFIG_KEY} = {value!r}, not a positive "
            "number of seconds",
            hint=f"service.config({step.step_id!r}, {HEARTBEAT_CONFIG_KEY}=20)",
        )
    return float(value)


@contextmanager
def _heartbeating() -> Iterator[None]:
    """Heartbeats the current activity from a thread of its own while the block runs, every
    third of its heartbeat timeout, so the server learns within that timeout that the worker
    running the step is gone (a killed process sends nothing more). A local activity, or one
    scheduled without a heartbeat timeout, is left alone (a local activity cannot heartbeat)."""
    info = activity.info()
    if info.is_local or not info.heartbeat_timeout:
        yield
        return
    interval_s = info.heartbeat_timeout.total_seconds() / 3
    done = threading.Event()
    context = contextvars.copy_context()  # activity.heartbeat() finds its activity there

    def beat() -> None:
        while not done.wait(interval_s):
            activity.heartbeat()

    beater = threading.Thread(
        target=context.run, args=(beat,), name=f"memoir-heartbeat-{info.activity_id}", daemon=True
    )
    activity.heartbeat()  # at once: the attempt has started on this worker
    beater.start()
    try:
        yield
    finally:
        done.set()
        beater.join(timeout=interval_s + 1)


async def stored_input_state(client: Client, pipeline_name: str, run_id: str) -> State | None:
    """The state a stored run of `pipeline_name` started with (its workflow's input), or None
    if the server has no such run."""
    try:
        history = await client.get_workflow_handle(run_id).fetch_history()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    started = history.events[0].workflow_execution_started_event_attributes
    if started.workflow_type.name != STORED_WORKFLOW_NAME:  # an in-process run
        return None
    (run,) = await client.data_converter.decode(started.input.payloads, [StoredRunInput])
    if not isinstance(run, StoredRunInput) or run.pipeline != pipeline_name:
        return None
    return dict(run.state)


def stored_outcome(
    name: str, revision: int, result: StoredRunResult, workflow_id: str
) -> RunOutcome:
    """A stored run's workflow result as the run outcome every runner returns."""
    timings = [StepTiming(t.step_id, t.ms, t.attempts, t.error) for t in result.timings]
    if result.error_type is None:
        return RunOutcome(result.state, timings, run_id=workflow_id)
    if result.failed_step is None:  # the revision could not be read: no step ran
        return RunOutcome(
            result.state,
            timings,
            "failed",
            f"pipeline {name!r} at revision {revision} cannot run: {result.error_message}",
            run_id=workflow_id,
        )
    return RunOutcome(
        result.state,
        timings,
        "failed",
        f"step {result.failed_step!r} failed: {result.error_message}",
        failed_step=result.failed_step,
        run_id=workflow_id,
    )
