"""The Temporal workflow of one pipeline run: each step an activity, state passed as JSON.

This module is loaded into Temporal's workflow sandbox, so it holds only deterministic code and
plain data: the step's code is not here but in the worker's process (see `TemporalRunner`), which
the activity reaches by the run's id and the step's index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, TimeoutError

from memory_core.pipeline.runners._attempts import timeout_message

WORKFLOW_NAME = "memoir.pipeline"
RUN_STEP_ACTIVITY = "memoir.run_step"


@dataclass
class StepCall:
    step_id: str
    index: int
    retries: int
    timeout_s: float


@dataclass
class PipelineRunInput:
    run_id: str
    steps: list[StepCall]
    state: dict[str, Any]
    retry_initial_interval_s: float = 1.0
    local_activities: bool = False


@dataclass
class PipelineRunResult:
    state: dict[str, Any]
    failed_step: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    timed_out: bool = False
    completed: list[str] = field(default_factory=list)


@workflow.defn(name=WORKFLOW_NAME)
class PipelineWorkflow:
    @workflow.run
    async def run(self, run: PipelineRunInput) -> PipelineRunResult:
        state = dict(run.state)
        completed: list[str] = []
        for call in run.steps:
            execute = (
                workflow.execute_local_activity
                if run.local_activities
                else workflow.execute_activity
            )
            try:
                produced = await execute(
                    RUN_STEP_ACTIVITY,
                    args=[run.run_id, call.index, state],
                    start_to_close_timeout=timedelta(seconds=call.timeout_s),
                    retry_policy=RetryPolicy(
                        maximum_attempts=call.retries + 1,
                        initial_interval=timedelta(seconds=run.retry_initial_interval_s),
                    ),
                    result_type=dict,
                )
            except FailureError as exc:  # ActivityError; a local activity's arrives unwrapped
                return _failed(state, call, exc, completed)
            state.update(produced)
            completed.append(call.step_id)
        return PipelineRunResult(state, completed=completed)


def _failed(
    state: dict[str, Any], call: StepCall, exc: FailureError, completed: list[str]
) -> PipelineRunResult:
    cause = exc.cause if isinstance(exc, ActivityError) else exc
    if isinstance(cause, TimeoutError):
        return PipelineRunResult(
            state,
            call.step_id,
            "TimeoutError",
            timeout_message(call.timeout_s),
            timed_out=True,
            completed=completed,
        )
    if isinstance(cause, ApplicationError):
        return PipelineRunResult(
            state, call.step_id, cause.type, cause.message, completed=completed
        )
    return PipelineRunResult(
        state, call.step_id, type(cause).__name__, str(cause), completed=completed
    )
