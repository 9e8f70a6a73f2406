"""What every runner records about a step's attempts, so their run records read the same.

The sync runner's record is the reference: a step's timing is the duration of its last attempt,
`attempts` counts every try, and a step that still fails after its retries stops the run with
`error = "step '<step_id>' failed: <message>"` and the cause (`"<ExceptionType>: <message>"`) on
its timing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
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


def attempt(
    step: StepSpec, state: State, execute_step: ExecuteStep, record: StepRecord
) -> Mapping[str, Any]:
    """Runs one attempt of `step`, noting its duration and, if it raises, its cause."""
    record.attempts += 1
    started = time.perf_counter()
    try:
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
