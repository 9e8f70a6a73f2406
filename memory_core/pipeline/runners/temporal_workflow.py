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
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    TimeoutError,
    TimeoutType,
)

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


# -- stored runs: steps addressed by (pipeline, revision, step id), rebuilt by any worker --------

STORED_WORKFLOW_NAME = "memoir.stored_pipeline"
PLAN_STORED_ACTIVITY = "memoir.plan_stored_run"
RUN_STORED_STEP_ACTIVITY = "memoir.run_stored_step"
PLAN_TIMEOUT_S = 60.0
PLAN_RETRIES = 3
DEFAULT_HEARTBEAT_TIMEOUT_S = 20.0
"""A stored step's heartbeat timeout when neither its config nor the runner sets one."""
DEFAULT_WORKER_LOSSES = 3
"""How many times a stored step lost with its worker is scheduled again (beyond its retries)."""


@dataclass
class StoredStep:
    """One enabled step of a stored revision, as the plan activity read it from the store."""

    step_id: str
    retries: int
    timeout_s: float | None
    heartbeat_timeout_s: float | None = None
    """The step's config `heartbeat_timeout_s`, if it sets one."""


@dataclass
class StoredRunInput:
    """All a stored run carries: which pipeline, at which revision, on which state (whose
    scope the worker checks). The store and the providers are the worker's own."""

    pipeline: str
    revision: int
    state: dict[str, Any]
    default_step_timeout_s: float = 600.0
    retry_initial_interval_s: float = 1.0
    local_activities: bool = False
    default_heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S
    worker_losses: int = DEFAULT_WORKER_LOSSES


@dataclass
class StepDone:
    """What a stored step's activity returns: its keys, its duration and which attempt it was."""

    produced: dict[str, Any]
    ms: float
    attempt: int


@dataclass
class StepTimingRecord:
    step_id: str
    ms: float
    attempts: int
    error: str | None = None


@dataclass
class StoredRunResult:
    state: dict[str, Any]
    timings: list[StepTimingRecord] = field(default_factory=list)
    failed_step: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    timed_out: bool = False


@workflow.defn(name=STORED_WORKFLOW_NAME)
class StoredPipelineWorkflow:
    """Plans the run from the stored revision (recorded once in the history, so a replay on
    another worker sees the same steps even if the revision's pipelines were edited since),
    then runs each step as an activity addressed by (pipeline, revision, step id)."""

    @workflow.run
    async def run(self, run: StoredRunInput) -> StoredRunResult:
        state = dict(run.state)
        try:
            # A local activity: a read of the store, recorded in the history as a marker
            # without a round trip through the server's task queue (about 100 ms here).
            plan: list[StoredStep] = await workflow.execute_local_activity(
                PLAN_STORED_ACTIVITY,
                args=[run.pipeline, run.revision],
                start_to_close_timeout=timedelta(seconds=PLAN_TIMEOUT_S),
                retry_policy=RetryPolicy(
                    maximum_attempts=PLAN_RETRIES,
                    initial_interval=timedelta(seconds=run.retry_initial_interval_s),
                ),
                result_type=list[StoredStep],
            )
        except FailureError as exc:  # e.g. a revision this worker's store does not have
            planned = _failed(state, StepCall("(plan)", -1, 0, PLAN_TIMEOUT_S), exc, [])
            return StoredRunResult(
                state, [], None, planned.error_type, planned.error_message, planned.timed_out
            )
        timings: list[StepTimingRecord] = []
        for step in plan:
            timeout_s = step.timeout_s if step.timeout_s is not None else run.default_step_timeout_s
            heartbeat_s = (
                step.heartbeat_timeout_s
                if step.heartbeat_timeout_s is not None
                else run.default_heartbeat_timeout_s
            )
            lost = 0  # schedulings whose last attempt died with its worker (heartbeat timeout)
            while True:
                try:
                    done = await _execute_step(run, step, state, timeout_s, heartbeat_s)
                except FailureError as exc:
                    if _worker_lost(exc) and lost < run.worker_losses:
                        # The step's last attempt died with its worker, not of its own error:
                        # schedule it again (Temporal never has two attempts of it open).
                        lost += 1
                        continue
                    call = StepCall(step.step_id, len(timings), step.retries, timeout_s)
                    failed = _failed(state, call, exc, [])
                    if _worker_lost(exc):
                        failed.error_message = (
                            f"its worker was lost: no heartbeat for {heartbeat_s:g} s (its "
                            f"heartbeat_timeout_s), {lost + 1} time(s) (worker_losses = "
                            f"{run.worker_losses})"
                        )
                        failed.timed_out = False
                    cause = f"{failed.error_type}: {failed.error_message}"
                    timings.append(
                        StepTimingRecord(
                            step.step_id,
                            timeout_s * 1000 if failed.timed_out else 0.0,
                            (step.retries + 1) * (lost + 1),
                            cause,
                        )
                    )
                    return StoredRunResult(
                        state,
                        timings,
                        failed.failed_step,
                        failed.error_type,
                        failed.error_message,
                        failed.timed_out,
                    )
                break
            state.update(done.produced)
            # Each lost scheduling had used all its retries + 1 attempts before it failed.
            attempts = (step.retries + 1) * lost + done.attempt
            timings.append(StepTimingRecord(step.step_id, done.ms, attempts))
        return StoredRunResult(state, timings)


async def _execute_step(
    run: StoredRunInput,
    step: StoredStep,
    state: dict[str, Any],
    timeout_s: float,
    heartbeat_s: float,
) -> StepDone:
    """One scheduling of a stored step's activity, with Temporal's retries for its errors."""
    args = [run.pipeline, run.revision, step.step_id, state]
    retry_policy = RetryPolicy(
        maximum_attempts=step.retries + 1,
        initial_interval=timedelta(seconds=run.retry_initial_interval_s),
    )
    if run.local_activities:  # a local activity cannot heartbeat: no heartbeat timeout
        return await workflow.execute_local_activity(
            RUN_STORED_STEP_ACTIVITY,
            args=args,
            start_to_close_timeout=timedelta(seconds=timeout_s),
            retry_policy=retry_policy,
            result_type=StepDone,
        )
    return await workflow.execute_activity(
        RUN_STORED_STEP_ACTIVITY,
        args=args,
        start_to_close_timeout=timedelta(seconds=timeout_s),
        heartbeat_timeout=timedelta(seconds=heartbeat_s),
        retry_policy=retry_policy,
        result_type=StepDone,
    )


def _worker_lost(exc: FailureError) -> bool:
    """Whether an activity failed because its worker stopped heartbeating (killed, or cut off
    from the server), rather than of the step's own error or its start-to-close timeout."""
    cause = exc.cause if isinstance(exc, ActivityError) else exc
    return isinstance(cause, TimeoutError) and cause.type == TimeoutType.HEARTBEAT
