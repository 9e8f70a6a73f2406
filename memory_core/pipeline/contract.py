"""The pipeline contract shared by steps, pipelines and runners (seed 004 §8.2 and §9).

A pipeline is an ordered tuple of `StepSpec`s; a step's code is looked up by its `impl` name in
one registry, so a pipeline revision is plain data (JSON) that can be stored, diffed and rolled
back. Pipeline state is a dict of JSON-serialisable values, so every runner (sync, Burr,
Temporal) can persist it between steps. A runner only decides *how* steps run (retries,
timeouts, persistence); *what* a step does is `execute_step`, handed to it by the service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Capability = Literal["llm", "vector", "db_write"]
PipelineName = Literal["memorize", "retrieve", "evolve"]
State = dict[str, Any]


@dataclass(frozen=True)
class StepSpec:
    """One step as data: what it needs, what it makes, what it may touch, how it is configured."""

    step_id: str
    impl: str
    role: str
    requires: frozenset[str] = frozenset()
    produces: frozenset[str] = frozenset()
    capabilities: frozenset[Capability] = frozenset()
    config: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True
    retries: int = 0
    timeout_s: float | None = None


@dataclass(frozen=True)
class Pipeline:
    name: PipelineName
    steps: tuple[StepSpec, ...]

    def enabled_steps(self) -> tuple[StepSpec, ...]:
        return tuple(step for step in self.steps if step.enabled)


@dataclass(frozen=True)
class StepTiming:
    step_id: str
    ms: float
    attempts: int = 1
    error: str | None = None


@dataclass
class RunOutcome:
    state: State
    timings: list[StepTiming]
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    failed_step: str | None = None
    """The step_id whose failure (after its retries) stopped the run."""
    run_id: str | None = None
    """The runner's own id for the run (Burr app id, Temporal workflow id); None for sync."""


ExecuteStep = Callable[[StepSpec, State], Mapping[str, Any]]
"""Runs one step's code on a state and returns the keys it produced (merged into the state)."""


class Runner(Protocol):
    name: str

    def run(self, pipeline: Pipeline, state: State, execute_step: ExecuteStep) -> RunOutcome: ...


class StepSource(Protocol):
    """What a durable runner's worker rebuilds a step from: stored data only (the service).

    A durable run names its pipeline, its revision and a step id; the worker looks them up in
    *its own* store and runs them with *its own* providers, so a run outlives the process that
    started it. Nothing but the revision and the scope in the state comes from the run.
    """

    def stored_pipeline(self, name: PipelineName, revision: int) -> Pipeline:
        """The pipeline `name` as stored at `revision`.

        Raises:
            NotFoundError: no such revision in the store.
        """
        ...

    def run_stored_step(
        self, name: PipelineName, revision: int, step_id: str, state: State
    ) -> Mapping[str, Any]:
        """Runs step `step_id` of `name` at `revision` on `state` (its scope validated first).

        Raises:
            NotFoundError: no such revision, or no such enabled step in it.
            InvalidInputError: the state's scope or revision does not fit this store.
        """
        ...


@runtime_checkable
class DurableRunner(Protocol):
    """A runner whose runs survive the process: steps are addressed by (revision, step id)."""

    name: str

    def attach(self, source: StepSource) -> None:
        """The service whose stored pipelines this runner's worker runs."""
        ...

    def run_stored(self, name: PipelineName, revision: int, state: State) -> RunOutcome:
        """Runs the stored revision's enabled steps of pipeline `name` on `state`."""
        ...


@runtime_checkable
class ResumableRunner(Protocol):
    """A runner that saves each run's state after every step, so another process can finish
    the run from the last saved step (Burr)."""

    name: str

    def persisted_state(self, pipeline_name: str, run_id: str) -> State | None:
        """The pipeline state last saved for a run, or None if there is none."""
        ...

    def resume(self, pipeline: Pipeline, run_id: str, execute_step: ExecuteStep) -> RunOutcome:
        """Continues a saved run after its last completed step (or at its failed one)."""
        ...


class SyncRunner:
    """The default runner: steps run one after another in this process; a failure stops the run.

    A step with `timeout_s` runs in a thread of its own and is given at most that long (the run
    moves on without it; Python cannot stop a thread), worded as every runner words it.
    """

    name = "sync"

    def run(self, pipeline: Pipeline, state: State, execute_step: ExecuteStep) -> RunOutcome:
        from memory_core.pipeline.runners._attempts import StepRecord, attempt, outcome

        state = dict(state)
        records: list[StepRecord] = []
        for step in pipeline.enabled_steps():
            record = StepRecord(step.step_id)
            records.append(record)
            while True:
                try:
                    produced = attempt(step, state, execute_step, record, enforce_timeout=True)
                except Exception:  # the record names the cause
                    if record.attempts <= step.retries:
                        continue
                    return outcome(state, records, failed=record)
                break
            state.update(produced)
        return outcome(state, records)
