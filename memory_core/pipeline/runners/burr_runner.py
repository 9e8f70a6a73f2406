"""The Burr runner: each enabled step is a Burr action, and the state after every step is saved
by Burr's SQLite persister, so a run can be inspected, and a failed one resumed, by its app id.

Burr has no retries or timeouts of its own: an action retries its step as the `StepSpec` says
(like the sync runner) and gives each attempt at most the step's `timeout_s` (like Temporal's
start-to-close timeout; the step runs in a thread of its own when it has one). A step that still
fails is saved by Burr with status "failed" and the state from before it, which is where
`resume` starts again.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burr.core import Application, ApplicationBuilder, default
from burr.core import State as BurrState
from burr.core.action import SingleStepAction
from burr.core.persistence import SQLitePersister

from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.pipeline.contract import ExecuteStep, Pipeline, RunOutcome, State, StepSpec
from memory_core.pipeline.runners._attempts import StepRecord, attempt, outcome

__all__ = ["BurrRunner", "PersistedRun"]

STATE_FILE_NAME = "burr_state.db"
"""The persister's file when the runner is given a folder (the store's)."""


@dataclass(frozen=True)
class PersistedRun:
    """The last state Burr saved for a run: after `position`, or before it if it failed."""

    app_id: str
    pipeline: str
    position: str
    status: str
    sequence_id: int
    state: State


class _StepAction(SingleStepAction):
    """One pipeline step as a Burr action, retried in place as its spec says."""

    def __init__(self, step: StepSpec, execute_step: ExecuteStep, record: StepRecord) -> None:
        super().__init__()
        self._step = step
        self._execute_step = execute_step
        self._record = record
        self._written: list[str] | None = None

    @property
    def reads(self) -> list[str]:
        return sorted(self._step.requires)

    @property
    def writes(self) -> list[str]:
        # Burr checks that an action wrote every key it declares; `produces` is a promise the
        # sync runner does not check, so once the step has run, its actual keys are declared.
        return self._written if self._written is not None else sorted(self._step.produces)

    def run_and_update(
        self, state: BurrState, **run_kwargs: Any
    ) -> tuple[dict[str, Any], BurrState]:
        plain = _pipeline_state(state)
        while True:
            try:
                produced: Mapping[str, Any] = attempt(
                    self._step, plain, self._execute_step, self._record, enforce_timeout=True
                )
            except Exception:
                if self._record.attempts <= self._step.retries:
                    continue
                raise
            break
        self._written = sorted(produced)
        return dict(produced), state.update(**produced)


class _SerialisedPersister(SQLitePersister):
    """Burr's SQLite persister on one connection shared by concurrent runs: a call at a time
    (each save is its own INSERT and COMMIT)."""

    def __init__(self, db_path: str, *, connection: sqlite3.Connection) -> None:
        super().__init__(db_path, connection=connection)
        self._calls = threading.Lock()

    def load(self, *args: Any, **kwargs: Any) -> Any:
        with self._calls:
            return super().load(*args, **kwargs)

    def list_app_ids(self, *args: Any, **kwargs: Any) -> list[str]:
        with self._calls:
            return super().list_app_ids(*args, **kwargs)

    def save(self, *args: Any, **kwargs: Any) -> None:
        with self._calls:
            super().save(*args, **kwargs)


def _pipeline_state(state: BurrState) -> State:
    """The pipeline's keys of a Burr state (Burr keeps its own under a `__` prefix)."""
    return {key: value for key, value in state.get_all().items() if not key.startswith("__")}


class BurrRunner:
    """Runs a pipeline as a Burr application whose state is persisted to SQLite after each step.

    Args:
        state_path: the SQLite file Burr saves state to, or a folder (the store's) in which
            `burr_state.db` is used; a path with no suffix is taken as a folder. The folder is
            created if missing.
    """

    name = "burr"

    def __init__(self, state_path: str | Path) -> None:
        path = Path(state_path)
        if path.is_dir() or not path.suffix:
            path = path / STATE_FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        self.state_path = path
        self._lock = threading.Lock()
        self._shared: _SerialisedPersister | None = None

    def run(self, pipeline: Pipeline, state: State, execute_step: ExecuteStep) -> RunOutcome:
        """Runs every enabled step in order under a new Burr app id (the outcome's `run_id`)."""
        return self._run(pipeline, dict(state), execute_step, uuid.uuid4().hex)

    def resume(self, pipeline: Pipeline, app_id: str, execute_step: ExecuteStep) -> RunOutcome:
        """Continues a saved run: from the step that failed, or after the last one completed.

        Raises:
            NotFoundError: no state was saved for `app_id` under this pipeline.
            InvalidInputError: the run stopped at a step the pipeline no longer has enabled.
        """
        saved = self.persisted(pipeline.name, app_id)
        if saved is None:
            raise NotFoundError(
                f"no Burr run {app_id!r} of pipeline {pipeline.name!r} in {self.state_path}",
                hint="use the run_id of a RunOutcome from this runner (BurrRunner.app_ids lists them)",
            )
        enabled = [step.step_id for step in pipeline.enabled_steps()]
        if saved.position not in enabled:
            raise InvalidInputError(
                f"Burr run {app_id!r} stopped at step {saved.position!r}, which pipeline "
                f"{pipeline.name!r} no longer has enabled (its steps: {', '.join(enabled)})",
                hint="resume with the pipeline revision the run started on, or start a new run",
            )
        return self._run(pipeline, saved.state, execute_step, app_id)

    def persisted(self, pipeline_name: str, app_id: str) -> PersistedRun | None:
        """The last state saved for a run, or None if there is none."""
        loaded = self._persister().load(pipeline_name, app_id)
        if loaded is None:
            return None
        return PersistedRun(
            app_id=app_id,
            pipeline=pipeline_name,
            position=loaded["position"],
            status=loaded["status"],
            sequence_id=loaded["sequence_id"],
            state=_pipeline_state(loaded["state"]),
        )

    def persisted_state(self, pipeline_name: str, app_id: str) -> State | None:
        """The pipeline state last saved for a run, or None (what `MemoryService.resume` reads)."""
        saved = self.persisted(pipeline_name, app_id)
        return saved.state if saved is not None else None

    def app_ids(self, pipeline_name: str) -> list[str]:
        """The app ids of this pipeline's saved runs, newest first."""
        return self._persister().list_app_ids(pipeline_name)

    def close(self) -> None:
        """Closes the state file (a later run opens it again)."""
        with self._lock:
            if self._shared is not None:
                self._shared.cleanup()
                self._shared = None

    def _persister(self) -> SQLitePersister:
        """The runner's one persister: opened once, since closing the last connection to a WAL
        file checkpoints it (a sync per run otherwise)."""
        with self._lock:
            if self._shared is None:
                # Runs may come from several threads: one connection, its calls serialised.
                connection = sqlite3.connect(self.state_path, check_same_thread=False)
                # As memoir's own store: WAL, and a sync at checkpoints rather than at every
                # commit (Burr commits after every step; a full sync each time costs ~20 ms a
                # step on a busy disk). A crash can lose the last saved steps, never the
                # file's consistency.
                connection.execute("PRAGMA journal_mode = WAL")
                connection.execute("PRAGMA synchronous = NORMAL")
                persister = _SerialisedPersister(str(self.state_path), connection=connection)
                persister.initialize()
                self._shared = persister
            return self._shared

    def _run(
        self, pipeline: Pipeline, state: State, execute_step: ExecuteStep, app_id: str
    ) -> RunOutcome:
        steps = pipeline.enabled_steps()
        if not steps:
            return outcome(state, [], run_id=app_id)
        records = {step.step_id: StepRecord(step.step_id) for step in steps}
        actions = {
            step.step_id: _StepAction(step, execute_step, records[step.step_id]) for step in steps
        }
        last = steps[-1].step_id
        persister = self._persister()
        saved = persister.load(pipeline.name, app_id)
        if saved is not None and saved["status"] == "completed" and saved["position"] == last:
            return outcome(_pipeline_state(saved["state"]), [], run_id=app_id)
        app: Application[Any] = (
            ApplicationBuilder()
            .with_actions(**actions)
            .with_transitions(
                *((a.step_id, b.step_id, default) for a, b in itertools.pairwise(steps))
            )
            .with_identifiers(app_id=app_id, partition_key=pipeline.name)
            .initialize_from(
                persister,
                resume_at_next_action=True,
                default_state=state,
                default_entrypoint=steps[0].step_id,
            )
            .with_state_persister(persister)
            .build()
        )
        ordered = [records[step.step_id] for step in steps]
        try:
            _, _, final = app.run(halt_after=[last])
        except Exception:  # a step's cause is on its record; Burr saved it as "failed"
            failed = next((r for r in ordered if r.cause is not None), None)
            if failed is None:  # Burr's own failure, not a step's
                raise
            return outcome(_pipeline_state(app.state), ordered, failed=failed, run_id=app_id)
        return outcome(_pipeline_state(final), ordered, run_id=app_id)
