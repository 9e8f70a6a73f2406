"""What every runner records about a step's attempts, so their run records read the same.

The sync runner's record is the reference: a step's timing is the duration of its last attempt,
`attempts` counts every try, and a step that still fails after its retries stops the run with
`error = "step '<step_id>' failed: <message>"` and the cause (`"<ExceptionType>: <message>"`) on
its timing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any

from memory_core.pipeline.contract import (
    ExecuteStep,
    RunOutcome,
    State,
    StepSpec,
    StepTiming,
)


@dataclass
class StepRecord:
    """One step's attempts so far (mutated by `attempt`, read when the run ends)."""

    step_id: str
    attempts: int = 0
    ms: float = 0.0
    cause: str | None = None
    message: str | None = None

    def timing(self) -> StepTiming:
        return StepTiming(self.step_id, self.ms, self.attempts, self.cause)


def timeout_message(timeout_s: float) -> str:
    """How every runner words a step that ran past its `timeout_s`."""
    return f"timed out after {timeout_s:g} s (its timeout_s)"


def call_with_timeout(step: StepSpec, state: State, execute_step: ExecuteStep) -> Mapping[str, Any]:
    """`execute_step`, given at most `step.timeout_s` (in a thread of its own when set).

    A step past its timeout is not stopped (Python cannot stop a thread): the run moves on
    without it, and whatever it returns later is dropped, as with Temporal's activities.

    Raises:
        TimeoutError: the step ran past its timeout.
    """
    if step.timeout_s is None:
        return execute_step(step, state)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"memoir-step-{step.step_id}")
    try:
        return pool.submit(execute_step, step, state).result(timeout=step.timeout_s)
    except FutureTimeoutError:
        raise TimeoutError(timeout_message(step.timeout_s)) from None
    finally:
        pool.shutdown(wait=False)


def attempt(
    step: StepSpec,
    state: State,
    execute_step: ExecuteStep,
    record: StepRecord,
    *,
    enforce_timeout: bool = False,
) -> Mapping[str, Any]:
    """Runs one attempt of `step`, noting its duration and, if it raises, its cause.

    `enforce_timeout` applies the step's `timeout_s` here (runners whose engine does not).
    """
    record.attempts += 1
    started = time.perf_counter()
    try:
        if enforce_timeout:
            produced = call_with_timeout(step, state, execute_step)
        else:
            produced = execute_step(step, state)
    except Exception as exc:  # noted for the run record, then re-raised to the runner
        record.ms = (time.perf_counter() - started) * 1000
        record.cause = f"{type(exc).__name__}: {exc}"
        record.message = str(exc)
        raise
    record.ms = (time.perf_counter() - started) * 1000
    record.cause = None
    record.message = None
    return produced


def outcome(
    state: State,
    records: list[StepRecord],
    *,
    failed: StepRecord | None = None,
    run_id: str | None = None,
) -> RunOutcome:
    """The run's outcome from its step records; `failed` is the step that stopped it."""
    timings = [record.timing() for record in records if record.attempts]
    if failed is None:
        return RunOutcome(state, timings, run_id=run_id)
    return RunOutcome(
        state,
        timings,
        "failed",
        f"step {failed.step_id!r} failed: {failed.message}",
        failed_step=failed.step_id,
        run_id=run_id,
    )
