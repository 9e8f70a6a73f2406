"""Runs of the memory layer's pipelines: the run log, resume, and the stored steps a durable
runner's worker runs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from memory_core.errors import ConfigError, InvalidInputError, NotFoundError, PipelineRunError
from memory_core.pipeline.contract import (
    DurableRunner,
    ExecuteStep,
    Pipeline,
    PipelineName,
    ResumableRunner,
    RunOutcome,
    State,
    StepSpec,
)
from memory_core.pipeline.editing import set_from_json
from memory_core.pipeline.profiles import resolve_step_profile
from memory_core.pipeline.revisions import PipelineRevisions
from memory_core.pipeline.scopes import ANY, ScopeSelector
from memory_core.pipeline.steps import LLMHandle
from memory_core.storage.layer import RunRow

__all__ = ["OUTPUTS", "PipelineRuns", "evolve_output", "memorize_output", "retrieve_output"]


class PipelineRuns(PipelineRevisions):
    """Runs and their log: one run per memorize / retrieve / evolve, its resume, and the
    stored steps a durable runner's worker runs."""

    def _execute_step(self, spec: StepSpec, state: State) -> Mapping[str, Any]:
        fn = self._registry.get(spec.impl)
        if fn is None:
            raise NotFoundError(
                f"step {spec.step_id!r} uses the unregistered impl {spec.impl!r}",
                hint="pass it to MemoryService.create(steps={...}) or register_step()",
            )
        name = resolve_step_profile(spec.config, spec.role, self.role_profiles)
        handle = LLMHandle(self.profiles.get(name, self.profiles["default"]))
        produced = dict(fn(self._ctx, spec, state, handle))
        if "llm" in spec.capabilities:
            usage = handle.usage or [
                {"profile": handle.profile.name, "model": handle.profile.model_label,
                 "requests": 0, "input_tokens": 0, "output_tokens": 0}
            ]  # fmt: skip
            produced["llm_usage"] = {**state.get("llm_usage", {}), spec.step_id: usage}
        return produced

    @property
    def execute_step(self) -> ExecuteStep:
        """The function a runner calls for each step."""
        return self._execute_step

    def _run(
        self,
        kind: PipelineName,
        state: State,
        *,
        input_summary: dict[str, Any],
        scope_range: dict[str, Any],
        summarise: Callable[[State], dict[str, Any]],
    ) -> tuple[str, RunOutcome]:
        run_id = uuid.uuid4().hex
        started = time.perf_counter()
        # The run keeps the revision it started on, whatever is edited while it runs.
        revision = self.pipeline_revision
        state = {**state, "pipeline_revision": revision}
        if isinstance(self.runner, DurableRunner):
            outcome = self.runner.run_stored(kind, revision, state)
        else:
            outcome = self.runner.run(self._pipelines[kind], state, self._execute_step)
        self._log_run(
            run_id, kind, revision, outcome, input_summary, scope_range, summarise, started
        )
        return run_id, outcome

    def _log_run(
        self,
        run_id: str,
        kind: PipelineName,
        revision: int,
        outcome: RunOutcome,
        input_summary: dict[str, Any],
        scope_range: dict[str, Any],
        summarise: Callable[[State], dict[str, Any]],
        started: float,
    ) -> None:
        """Writes the run log; a failed run then raises.

        Raises:
            PipelineRunError: the run failed (the log names the step and the cause).
        """
        body = {
            "kind": kind,
            "runner": self.runner.name,
            # the engine's own id (Burr app id, Temporal workflow id), to inspect or resume
            **({"runner_run_id": outcome.run_id} if outcome.run_id else {}),
            "pipeline_revision": revision,
            "status": outcome.status,
            "input": input_summary,
            "scope_range": scope_range,
            "steps": [
                {
                    "step_id": t.step_id,
                    "ms": round(t.ms, 3),
                    "attempts": t.attempts,
                    **({"error": t.error} if t.error else {}),
                }
                for t in outcome.timings
            ],
            "llm_usage": outcome.state.get("llm_usage", {}),
            "error": outcome.error,
            "output": summarise(outcome.state) if outcome.status == "ok" else None,
            "ms": round((time.perf_counter() - started) * 1000, 3),
        }
        self.store.add_run(RunRow(run_id, kind, body, self._clock()))
        if outcome.status != "ok":
            raise PipelineRunError(
                f"{kind} run {run_id} failed: {outcome.error}",
                hint="see the run log (service.runs()) for the step timings and cause",
                details={"run_id": run_id},
            )

    def resume(self, kind: PipelineName, runner_run_id: str) -> dict[str, Any]:
        """Finishes a run whose caller or process stopped, on the run's own pipeline revision
        (read from the store), and logs it (its input names the run it resumes). Burr runs the
        steps after the last one it saved; Temporal waits for the workflow, which any worker of
        its task queue (this service's included) finishes.

        Idempotent: once the run is logged as finished (ok) in this store, by its caller or by
        an earlier resume, this returns that entry, and runs and logs nothing.

        Returns:
            The run log entry of the resumed run (as in :meth:`runs`).

        Raises:
            ConfigError: this service's runner keeps no run state (the sync runner).
            NotFoundError: the runner saved nothing for `runner_run_id`, or its revision is
                not in this store.
            InvalidInputError: the saved scope does not fit this store.
            PipelineRunError: a step failed again.
        """
        runner = self.runner
        if not isinstance(runner, ResumableRunner):
            raise ConfigError(
                f"the {runner.name!r} runner keeps no run state to resume {runner_run_id!r} from",
                hint="create the service with the runner the run started on: burr on its state "
                "file, or temporal on its server and task queue",
            )
        finished = self.store.finished_run(kind, runner_run_id)
        if finished is not None:
            return {"run_id": finished.run_id, **finished.body}
        saved = runner.persisted_state(kind, runner_run_id)
        if saved is None:
            raise NotFoundError(
                f"the {runner.name} runner saved no {kind} run {runner_run_id!r}",
                hint="use the runner_run_id of a run in service.runs()",
            )
        revision = saved.get("pipeline_revision")
        if not isinstance(revision, int):
            raise InvalidInputError(
                f"{kind} run {runner_run_id!r} saved no pipeline revision (got {revision!r})",
                hint="only runs started by a MemoryService can be resumed by one",
            )
        self._check_run_scope(kind, saved)
        pipeline = self.stored_pipeline(kind, revision)
        run_id = uuid.uuid4().hex
        started = time.perf_counter()
        outcome = runner.resume(pipeline, runner_run_id, self._execute_step)
        scope_range = saved.get("scope") or saved.get("selector") or {}
        self._log_run(
            run_id,
            kind,
            revision,
            outcome,
            {"resumed": runner_run_id},
            scope_range,
            OUTPUTS[kind],
            started,
        )
        return self.runs(1)[0]

    # -- stored steps (what a durable runner's worker runs) ------------------------------------

    def stored_pipeline(self, name: PipelineName, revision: int) -> Pipeline:
        """The pipeline `name` as stored at `revision` (read from the store, not from memory).

        Raises:
            NotFoundError: no such revision in this store.
        """
        pipelines = self._stored.get(revision)
        if pipelines is None:
            pipelines = set_from_json(self._revision(revision).pipelines)
            self._stored[revision] = pipelines
        return pipelines[name]

    def run_stored_step(
        self, name: PipelineName, revision: int, step_id: str, state: State
    ) -> Mapping[str, Any]:
        """Runs one step rebuilt from the stored `revision`, on this service's store and
        providers. The run's scope and revision in `state` are checked against this store first:
        a run can choose its revision and scope, never the store or the providers.

        Raises:
            NotFoundError: no such revision, or no enabled step `step_id` in it.
            InvalidInputError: the state's scope does not fit this scope model or policy, or its
                `pipeline_revision` is not `revision`.
        """
        stated = state.get("pipeline_revision")
        if stated != revision:
            raise InvalidInputError(
                f"a {name} run addressed revision {revision} but its state says revision "
                f"{stated!r}",
                hint="start the run again from the service (it sets both)",
            )
        self._check_run_scope(name, state)
        pipeline = self.stored_pipeline(name, revision)
        spec = next((s for s in pipeline.enabled_steps() if s.step_id == step_id), None)
        if spec is None:
            enabled = ", ".join(s.step_id for s in pipeline.enabled_steps())
            raise NotFoundError(
                f"pipeline {name!r} at revision {revision} has no enabled step {step_id!r} "
                f"(its steps: {enabled})",
                hint="a run's steps come from its own revision: start a new run for another",
            )
        return self._execute_step(spec, state)

    def _check_run_scope(self, name: PipelineName, state: State) -> None:
        if name == "retrieve":
            raw = state.get("selector")
            if not isinstance(raw, dict):
                raise InvalidInputError(
                    f"a retrieve run's state has no scope selector (got {raw!r})",
                    hint="start retrieve runs through the service",
                )
            selector = ScopeSelector({k: ANY if v is None else v for k, v in raw.items()})
            compiled = self.policy.compile(self.scope_spec, selector)
            as_json = {k: (list(v) if v is not None else None) for k, v in compiled.items()}
            if as_json != raw:
                raise InvalidInputError(
                    f"a retrieve run's selector {raw!r} is not in its checked form {as_json!r}",
                    hint="start retrieve runs through the service",
                )
            return
        raw_scope = state.get("scope")
        if not isinstance(raw_scope, dict):
            raise InvalidInputError(
                f"a {name} run's state has no scope (got {raw_scope!r})",
                hint="start runs through the service",
            )
        if self.scope_spec.scope(raw_scope) != raw_scope:
            raise InvalidInputError(
                f"a {name} run's scope {raw_scope!r} is not in its checked form",
                hint="start runs through the service",
            )

    def runs(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest run logs, newest first."""
        return [{"run_id": r.run_id, **r.body} for r in self.store.runs(limit)]


def memorize_output(state: State) -> dict[str, Any]:
    persisted = state.get("persisted", {})
    return {
        "resource_id": state.get("resource", {}).get("resource_id"),
        "items_added": len(persisted.get("items_added", [])),
        "items_merged": len(persisted.get("items_merged", [])),
        "categories": persisted.get("categories", []),
        "missing_capabilities": state.get("missing_capabilities", []),
    }


def retrieve_output(state: State) -> dict[str, Any]:
    ctx = state.get("context", {})
    return {
        "layer": ctx.get("layer"),
        "items": [i["item_id"] for i in ctx.get("items", [])],
        "tokens": ctx.get("tokens", 0),
        "fallbacks": state.get("fallbacks", []),
    }


def evolve_output(state: State) -> dict[str, Any]:
    diff = state.get("diff", {})
    return {
        "superseded": len(diff.get("superseded", [])),
        "recategorised": len(diff.get("recategorised", [])),
        "intention_version": diff.get("intention", {}).get("to_version"),
    }


OUTPUTS: dict[str, Callable[[State], dict[str, Any]]] = {
    "memorize": memorize_output,
    "retrieve": retrieve_output,
    "evolve": evolve_output,
}
