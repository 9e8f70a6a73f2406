"""The Temporal runner's stored runs: the activities that rebuild a step from the stored
revision with the attached service, and the translations of a stored run's workflow (its input
state, its result) for `TemporalRunner`.

A stored step is addressed by (pipeline, revision, step id) only; what it runs with, the store
and the providers, is the attached service's, so any worker with a service on the same store can
run it.
"""

from __future__ import annotations

import time
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

__all__ = ["StoredActivities", "stored_input_state", "stored_outcome"]


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
            StoredStep(step.step_id, step.retries, step.timeout_s)
            for step in pipeline.enabled_steps()
        ]

    @activity.defn(name=RUN_STORED_STEP_ACTIVITY)
    def run_step(
        self, name: PipelineName, revision: int, step_id: str, state: dict[str, Any]
    ) -> StepDone:
        source = self._attached()
        started = time.perf_counter()
        try:
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
