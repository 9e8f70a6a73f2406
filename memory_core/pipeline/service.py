"""The memory layer for applications: ``MemoryService`` and its async twin (seed 004 §4-§10).

    service = MemoryService.create(
        scope_model=Scope, categories=["preferences", "projects"],
        storage_providers={"metadata_store": {"provider": "sqlite", "path": "layer.db"}},
        boundary_fields=["org_id"],
    )
    service.memorize({"org_id": "o1", "user_id": "u1"}, conversation=[...])
    service.retrieve(ScopeSelector(org_id="o1", user_id=ANY), "what does the user prefer?")

The scope model's fields become the scope columns (dynamic DDL); ``service_meta`` records the
scope schema hash, fields, DDL version, taxonomy version, pipeline revision and a redacted
provider summary. Pipelines are edited through ``config`` / ``insert_after`` / ``insert_before``
/ ``replace`` / ``remove`` / ``disable``; each accepted change is validated and stored as a new
revision that can be listed, diffed and rolled back to. Every run is logged.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from memory_core.embed import create_embedder
from memory_core.errors import (
    ConfigError,
    InvalidInputError,
    NotFoundError,
    PipelineRunError,
    ScopeMismatchError,
)
from memory_core.pipeline.async_service import AsyncMemoryService
from memory_core.pipeline.contract import (
    DurableRunner,
    ExecuteStep,
    Pipeline,
    PipelineName,
    ResumableRunner,
    Runner,
    RunOutcome,
    State,
    StepSpec,
    SyncRunner,
)
from memory_core.pipeline.creation import (
    DDL_VERSION,
    scope_difference,
    taxonomy_from,
    version_hash,
)
from memory_core.pipeline.editing import (
    PipelineSet,
    default_pipelines,
    diff_sets,
    edit_config,
    edit_insert,
    edit_remove,
    edit_replace,
    set_from_json,
    set_to_json,
    validate,
)
from memory_core.pipeline.profiles import (
    LayerProfile,
    parse_profiles,
    redacted_summary,
    resolve_step_profile,
)
from memory_core.pipeline.resource_access import DEFAULT_MAX_RESOURCE_BYTES, ResourceAccess
from memory_core.pipeline.results import EvolveResult, MemorizeResult, RetrieveResult
from memory_core.pipeline.scopes import ANY, ScopeSelector, ScopeSpec, SelectorPolicy
from memory_core.pipeline.steps import (
    BUILTIN_STEPS,
    LLMHandle,
    StepContext,
    StepFn,
    resource_hash,
)
from memory_core.storage.layer import (
    DdlMode,
    LayerStore,
    RevisionRow,
    RunRow,
    open_layer_store,
)
from memory_core.tokens import TokenCounter, create_token_counter

__all__ = ["DDL_VERSION", "AsyncMemoryService", "MemoryService"]


class MemoryService:
    """The synchronous memory layer. Create it with :meth:`create`."""

    def __init__(
        self,
        *,
        store: LayerStore,
        scope_spec: ScopeSpec,
        taxonomy: list[dict[str, str]],
        profiles: dict[str, LayerProfile],
        role_profiles: dict[str, str],
        policy: SelectorPolicy,
        runner: Runner,
        embed: Callable[[Sequence[str]], np.ndarray],
        tokens: TokenCounter,
        clock: Callable[[], float],
        registry: dict[str, StepFn],
        meta: dict[str, Any],
        pipelines: PipelineSet,
        resources: ResourceAccess | None = None,
    ) -> None:
        self.store = store
        self.scope_spec = scope_spec
        self.taxonomy = taxonomy
        self.profiles = profiles
        self.role_profiles = role_profiles
        self.policy = policy
        self.runner = runner
        self._registry = registry
        self._meta = meta
        self._pipelines = pipelines
        self._stored: dict[int, PipelineSet] = {}  # revisions are immutable once stored
        self._clock = clock
        self._ctx = StepContext(
            store=store,
            scope_spec=scope_spec,
            embed=embed,
            taxonomy=taxonomy,
            policy=policy,
            tokens=tokens,
            clock=clock,
            resources=resources or ResourceAccess.configure(),
        )

    # -- creation ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        *,
        scope_model: type[BaseModel],
        categories: Sequence[str | Mapping[str, str]],
        llm_providers: Mapping[str, Any] | None = None,
        storage_providers: Mapping[str, Any] | None = None,
        boundary_fields: Sequence[str] | None = None,
        ddl_mode: DdlMode = "create",
        runner: Runner | None = None,
        role_profiles: Mapping[str, str] | None = None,
        embedder: Any = "local",
        tokens: TokenCounter | None = None,
        steps: Mapping[str, StepFn] | None = None,
        max_combinations: int = 64,
        max_vector_top_k: int = 200,
        max_rerank_candidates: int = 50,
        max_vector_scan_items: int = 200_000,
        allowed_roots: Sequence[str | Path] | None = None,
        allowed_url_prefixes: Sequence[str] = (),
        max_resource_bytes: int = DEFAULT_MAX_RESOURCE_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> MemoryService:
        """Open (provisioning on first use) the memory layer.

        Args:
            scope_model: pydantic model whose fields, in order, are the scope columns.
            categories: the taxonomy: names, or ``{"key", "name", "description"}`` mappings.
            llm_providers: named profiles, ``default`` required (``None``: offline default).
            storage_providers: ``{"metadata_store": {"provider": "memory"|"sqlite", "path":
                …}, "vector_index": {"provider": "bruteforce"|"none"}}`` (default in-memory).
            boundary_fields: scope fields a cross-scope selector must give exactly or as a
                list (default: the first scope field).
            ddl_mode: ``create`` provisions missing tables; ``validate`` only checks them.
            runner: how steps run (default :class:`SyncRunner`).
            role_profiles: default profile per step role (``{"extract": "strong"}``).
            embedder: an embedder spec (``"local"``, ``"hash:256"``) or an ``Embedder``.
            steps: extra step implementations by impl name, for custom steps.
            allowed_roots: the folders a resource given by path or ``file://`` URI may be read
                from (relative ones against the working directory; default: the project
                folder of the working directory). This process's own choice: a run (e.g. a
                Temporal workflow anyone started on the worker's queue) cannot widen it.
            allowed_url_prefixes: ``http(s)://host/path`` prefixes a resource URL may start
                with (default: none, every URL is refused).
            max_resource_bytes: the largest resource read by URI.

        Raises:
            ConfigError: a bad scope model, taxonomy, profile, boundary, provider or URL
                prefix.
            ScopeMismatchError: the store was created with another scope model.
            SchemaError: ``validate`` mode and the tables are missing or differ.
        """
        spec = ScopeSpec.from_model(scope_model)
        taxonomy = taxonomy_from(categories)
        profiles = parse_profiles(llm_providers)
        roles = dict(role_profiles or {})
        for role, name in roles.items():
            if name not in profiles:
                raise ConfigError(
                    f"role_profiles maps role {role!r} to the undefined profile {name!r}",
                    hint=f"define it in llm_providers (profiles: {sorted(profiles)})",
                )
        policy = SelectorPolicy(
            boundary_fields=tuple(boundary_fields or spec.fields[:1]),
            max_combinations=max_combinations,
            max_vector_top_k=max_vector_top_k,
            max_rerank_candidates=max_rerank_candidates,
            max_vector_scan_items=max_vector_scan_items,
        )
        policy.check(spec)
        resources = ResourceAccess.configure(
            allowed_roots, allowed_url_prefixes, max_bytes=max_resource_bytes
        )
        store, storage_summary = open_layer_store(storage_providers)
        stored = store.get_meta()
        if stored is not None and stored.get("scope_schema_hash") != spec.schema_hash:
            raise ScopeMismatchError(
                f"this store was created with another scope model: {scope_difference(stored, spec)}",
                hint="open it with the scope model it was created with; to change scope fields, "
                "create a new store and memorize into it again (scopes are never migrated)",
                details={"stored": stored["scope_fields"], "given": spec.describe()},
            )
        store.provision(spec.fields, ddl_mode)
        embed = _embed_function(embedder)
        registry = {**BUILTIN_STEPS, **dict(steps or {})}
        revisions = store.revisions()
        if revisions:
            pipelines = set_from_json(revisions[-1].pipelines)
            revision = revisions[-1].revision
        else:
            pipelines = default_pipelines()
            revision = 1
            store.add_revision(RevisionRow(1, "defaults", set_to_json(pipelines), clock()))
        meta = {
            "scope_schema_hash": spec.schema_hash,
            "scope_fields": spec.describe(),
            "boundary_fields": list(policy.boundary_fields),
            "ddl_version": DDL_VERSION,
            "taxonomy": taxonomy,
            "taxonomy_version": version_hash(taxonomy),
            "pipeline_revision": revision,
            "providers": {
                "llm": redacted_summary(profiles),
                "role_profiles": roles,
                "storage": storage_summary,
                "embedder": getattr(embed, "embedder_id", "custom"),
            },
        }
        store.set_meta(meta)
        service = cls(
            store=store,
            scope_spec=spec,
            taxonomy=taxonomy,
            profiles=profiles,
            role_profiles=roles,
            policy=policy,
            runner=runner or SyncRunner(),
            embed=embed,
            tokens=tokens or create_token_counter(),
            clock=clock,
            registry=registry,
            meta=meta,
            pipelines=pipelines,
            resources=resources,
        )
        validate(
            pipelines,
            registered=registry,
            profiles=profiles,
            role_profiles=roles,
            capabilities=service.capabilities(),
        )
        if isinstance(service.runner, DurableRunner):
            # Its worker rebuilds steps from this service's store and providers.
            service.runner.attach(service)
        return service

    @property
    def meta(self) -> dict[str, Any]:
        """The ``service_meta`` record (a copy)."""
        return json.loads(json.dumps(self._meta))

    @property
    def resource_access(self) -> ResourceAccess:
        """The folders and URL prefixes this service reads resources from."""
        return self._ctx.resources

    @property
    def pipeline_revision(self) -> int:
        return int(self._meta["pipeline_revision"])

    def capabilities(self) -> set[str]:
        return {"llm", "db_write", *(["vector"] if self.store.vector_capable else [])}

    def close(self) -> None:
        self.store.close()
        close_runner = getattr(self.runner, "close", None)  # Temporal's worker and dev server
        if close_runner is not None:
            close_runner()

    # -- runs -------------------------------------------------------------------------------

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
            _OUTPUTS[kind],
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

    # -- memorize / retrieve / evolve -------------------------------------------------------

    def memorize(
        self,
        scope: BaseModel | Mapping[str, Any],
        *,
        conversation: Sequence[Mapping[str, Any]] | None = None,
        content: str | None = None,
        uri: str | None = None,
        mime: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemorizeResult:
        """Store a conversation or a file (content or URI) and build its items, categories and
        intention. Idempotent on resource hash + pipeline revision.

        Raises:
            InvalidInputError: the scope misses a field, or no / several resources were given.
            PathNotAllowedError: the URI is outside ``allowed_roots`` (symlinks followed) or
                under no ``allowed_url_prefixes``; nothing is stored.
            NotFoundError: the URI cannot be read.
            PipelineRunError: a step failed (the run log names it).
        """
        full = self.scope_spec.scope(scope)
        given = [n for n, v in (("conversation", conversation), ("content", content),
                                ("uri", uri)) if v is not None]  # fmt: skip
        if len(given) != 1:
            raise InvalidInputError(
                f"memorize needs exactly one of conversation, content or uri (got {given})",
                hint="pass conversation=[{'role': 'user', 'content': ...}] or a file",
            )
        inp = {
            "kind": "conversation" if conversation is not None else "file",
            "messages": [dict(m) for m in conversation] if conversation is not None else None,
            "content": content,
            "uri": uri,
            "mime": mime,
            "metadata": dict(metadata or {}),
        }
        digest = resource_hash(inp, self._ctx.resources.read)
        summary = {"kind": inp["kind"], "content_hash": digest, "uri": uri,
                   "messages": len(conversation or []), "chars": len(content or "")}  # fmt: skip
        existing = self.store.find_resource(full, digest, self.pipeline_revision)
        if existing is not None:
            run_id = uuid.uuid4().hex
            self.store.add_run(RunRow(run_id, "memorize", {
                "kind": "memorize", "runner": self.runner.name, "status": "skipped",
                "pipeline_revision": self.pipeline_revision, "input": summary,
                "scope_range": full, "steps": [], "llm_usage": {}, "error": None,
                "output": {"duplicate_of": existing.resource_id}, "ms": 0.0,
            }, self._clock()))  # fmt: skip
            return MemorizeResult(
                run_id=run_id,
                resource_id=existing.resource_id,
                duplicate=True,
                pipeline_revision=self.pipeline_revision,
            )

        run_id, outcome = self._run(
            "memorize",
            {"scope": full, "resource_input": inp, "content_hash": digest, "options": {}},
            input_summary=summary,
            scope_range=full,
            summarise=_memorize_output,
        )
        state = outcome.state
        persisted = state.get("persisted", {})
        return MemorizeResult(
            run_id=run_id,
            resource_id=state.get("resource", {}).get("resource_id"),
            items_added=persisted.get("items_added", []),
            items_merged=persisted.get("items_merged", []),
            categories=persisted.get("categories", []),
            intention_version=persisted.get("intention_version", 0),
            missing_capabilities=state.get("missing_capabilities", []),
            pipeline_revision=int(state.get("pipeline_revision", self.pipeline_revision)),
        )

    def retrieve(
        self,
        scope_selector: ScopeSelector | Mapping[str, Any],
        query: str,
        *,
        top_k: int | None = None,
        keep: int | None = None,
        budget_tokens: int | None = None,
    ) -> RetrieveResult:
        """Hierarchical retrieval (intention → category → item) across the selected scopes.

        Raises:
            InvalidInputError: an empty query, or a selector the policy refuses (a missing
                field, ANY on a boundary field).
            LimitExceededError: the selector expands to too many scope combinations.
            PipelineRunError: a step failed.
        """
        if not query or not query.strip():
            raise InvalidInputError("retrieve needs a non-empty query", hint="pass the question")
        selector = self.policy.compile(self.scope_spec, scope_selector)
        as_json = {k: (list(v) if v is not None else None) for k, v in selector.items()}
        scope_range = {k: ("ANY" if v is None else v) for k, v in as_json.items()}
        options = {"top_k": top_k, "keep": keep, "budget_tokens": budget_tokens}

        run_id, outcome = self._run(
            "retrieve",
            {"selector": as_json, "query": query, "options": options},
            input_summary={"query": query[:120], "chars": len(query)},
            scope_range=scope_range,
            summarise=_retrieve_output,
        )
        state = outcome.state
        ctx = state.get("context", {})
        items = [
            {k: v for k, v in item.items() if k in ("item_id", "scope", "text", "category_key",
                                                     "evidence", "confidence", "score", "arms")}
            for item in ctx.get("items", [])
        ]  # fmt: skip
        return RetrieveResult(
            run_id=run_id,
            context=ctx.get("text", ""),
            layer=ctx.get("layer", "item"),
            items=items,
            categories=ctx.get("categories", []),
            intention=ctx.get("intention"),
            sufficiency=state.get("sufficiency", []),
            fallbacks=state.get("fallbacks", []),
            tokens=ctx.get("tokens", 0),
            pipeline_revision=int(state.get("pipeline_revision", self.pipeline_revision)),
        )

    def evolve(self, scope: BaseModel | Mapping[str, Any]) -> EvolveResult:
        """Dedupe and refresh items, re-cluster categories, adjust the intention; return the diff.

        Raises:
            InvalidInputError: the scope misses a field.
            PipelineRunError: a step failed.
        """
        full = self.scope_spec.scope(scope)

        run_id, outcome = self._run(
            "evolve",
            {"scope": full, "options": {}},
            input_summary={"scope": full},
            scope_range=full,
            summarise=_evolve_output,
        )
        return EvolveResult(
            run_id=run_id,
            diff=outcome.state.get("diff", {}),
            pipeline_revision=int(outcome.state.get("pipeline_revision", self.pipeline_revision)),
        )

    # -- read-only queries ------------------------------------------------------------------

    def list_categories(
        self,
        scope: BaseModel | Mapping[str, Any],
        *,
        include_summary: bool = True,
        include_items: bool = False,
        items_per_category: int = 20,
    ) -> list[dict[str, Any]]:
        """The taxonomy of one scope with counts (and summaries, anchors, items if asked).

        Raises:
            InvalidInputError: the scope misses a field.
        """
        full = self.scope_spec.scope(scope)
        rows = {
            r.category_key: r for r in self.store.categories({k: (v,) for k, v in full.items()})
        }
        items = self.store.items({k: (v,) for k, v in full.items()}) if include_items else []
        out = []
        for category in self.taxonomy:
            row = rows.get(category["key"])
            entry: dict[str, Any] = {
                "category_key": category["key"],
                "name": category["name"],
                "item_count": row.item_count if row else 0,
            }
            if include_summary:
                entry["summary"] = row.summary if row else ""
                entry["anchor_ids"] = row.anchor_ids if row else []
            if include_items:
                entry["items"] = [
                    {"item_id": i.item_id, "text": i.text, "confidence": i.confidence}
                    for i in items
                    if i.category_key == category["key"]
                ][:items_per_category]
            out.append(entry)
        return out

    def get_category(
        self, scope: BaseModel | Mapping[str, Any], category: str, *, items: int = 50
    ) -> dict[str, Any]:
        """One category of one scope (by key or name) with its summary, anchors and items.

        Raises:
            InvalidInputError: the scope misses a field.
            NotFoundError: no such category in the taxonomy.
        """
        wanted = category.strip().lower()
        found = [c for c in self.taxonomy if wanted in (c["key"], c["name"].lower())]
        if not found:
            raise NotFoundError(
                f"no category {category!r} in the taxonomy",
                hint="use one of " + ", ".join(c["key"] for c in self.taxonomy),
            )
        key = found[0]["key"]
        entries = self.list_categories(
            scope, include_summary=True, include_items=True, items_per_category=items
        )
        return next(e for e in entries if e["category_key"] == key)

    def get_latest_intention(self, scope: BaseModel | Mapping[str, Any]) -> dict[str, Any] | None:
        """The newest intention (goals, constraints, progress, version) of one scope, or None.

        Raises:
            InvalidInputError: the scope misses a field.
        """
        full = self.scope_spec.scope(scope)
        rows = self.store.latest_intentions({k: (v,) for k, v in full.items()})
        if not rows:
            return None
        r = rows[0]
        return {
            "version": r.version,
            "goals": r.goals,
            "constraints": r.constraints,
            "progress": r.progress,
            "source_item_ids": r.source_item_ids,
        }

    # -- pipeline editing -------------------------------------------------------------------

    def register_step(self, impl: str, fn: StepFn) -> None:
        """Make a step implementation available to ``insert_*`` / ``replace`` by name."""
        self._registry[impl] = fn

    def _apply(self, pipelines: PipelineSet, change: str) -> int:
        validate(
            pipelines,
            registered=self._registry,
            profiles=self.profiles,
            role_profiles=self.role_profiles,
            capabilities=self.capabilities(),
        )
        revision = self.pipeline_revision + 1
        latest = self.store.revisions()
        if latest:
            revision = max(revision, latest[-1].revision + 1)
        self.store.add_revision(
            RevisionRow(revision, change, set_to_json(pipelines), self._clock())
        )
        self._pipelines = pipelines
        self._meta["pipeline_revision"] = revision
        self.store.set_meta(self._meta)
        return revision

    def config(self, step_id: str, **changes: Any) -> int:
        """Override a step's config (``llm_profile``, thresholds, ``top_k``…); returns the new
        revision.

        Raises:
            NotFoundError: no such step.
            ConfigError: the change fails validation (e.g. an undefined profile).
        """
        return self._apply(
            edit_config(self._pipelines, step_id, changes), f"config {step_id} {changes}"
        )

    def insert_after(self, step_id: str, new_step: StepSpec) -> int:
        """Insert ``new_step`` after ``step_id``; returns the new revision.

        Raises:
            NotFoundError: no such step.
            ConfigError: the new pipeline fails validation.
        """
        return self._apply(
            edit_insert(self._pipelines, step_id, new_step, after=True),
            f"insert {new_step.step_id} after {step_id}",
        )

    def insert_before(self, step_id: str, new_step: StepSpec) -> int:
        """Insert ``new_step`` before ``step_id`` (see :meth:`insert_after`)."""
        return self._apply(
            edit_insert(self._pipelines, step_id, new_step, after=False),
            f"insert {new_step.step_id} before {step_id}",
        )

    def replace(self, step_id: str, new_step: StepSpec) -> int:
        """Replace ``step_id`` by ``new_step`` (see :meth:`insert_after`)."""
        return self._apply(
            edit_replace(self._pipelines, step_id, new_step),
            f"replace {step_id} with {new_step.step_id}",
        )

    def remove(self, step_id: str) -> int:
        """Remove a step; refused when a later step needs what it produces."""
        return self._apply(edit_remove(self._pipelines, step_id, disable_only=False),
                           f"remove {step_id}")  # fmt: skip

    def disable(self, step_id: str) -> int:
        """Keep a step but skip it; refused like :meth:`remove`."""
        return self._apply(edit_remove(self._pipelines, step_id, disable_only=True),
                           f"disable {step_id}")  # fmt: skip

    def pipelines(self) -> dict[str, Any]:
        """The current pipelines as JSON."""
        return set_to_json(self._pipelines)

    def pipeline(self, name: PipelineName) -> Pipeline:
        return self._pipelines[name]

    def revisions(self) -> list[dict[str, Any]]:
        """Every pipeline revision: number, change, time."""
        return [
            {"revision": r.revision, "change": r.change, "created_at": r.created_at}
            for r in self.store.revisions()
        ]

    def _revision(self, revision: int) -> RevisionRow:
        for row in self.store.revisions():
            if row.revision == revision:
                return row
        raise NotFoundError(
            f"no pipeline revision {revision}",
            hint="list them with service.revisions() / memoir pipeline revisions",
        )

    def diff(self, old: int, new: int | None = None) -> dict[str, Any]:
        """What changed from revision ``old`` to ``new`` (default: the current one).

        Raises:
            NotFoundError: an unknown revision.
        """
        target = self._revision(new if new is not None else self.pipeline_revision)
        return diff_sets(self._revision(old).pipelines, target.pipelines)

    def rollback(self, revision: int) -> int:
        """Restore the pipelines of ``revision`` as a new revision; returns its number.

        Raises:
            NotFoundError: an unknown revision.
            ConfigError: that revision no longer validates (e.g. its step impl is gone).
        """
        row = self._revision(revision)
        return self._apply(set_from_json(row.pipelines), f"rollback to {revision}")


def _memorize_output(state: State) -> dict[str, Any]:
    persisted = state.get("persisted", {})
    return {
        "resource_id": state.get("resource", {}).get("resource_id"),
        "items_added": len(persisted.get("items_added", [])),
        "items_merged": len(persisted.get("items_merged", [])),
        "categories": persisted.get("categories", []),
        "missing_capabilities": state.get("missing_capabilities", []),
    }


def _retrieve_output(state: State) -> dict[str, Any]:
    ctx = state.get("context", {})
    return {
        "layer": ctx.get("layer"),
        "items": [i["item_id"] for i in ctx.get("items", [])],
        "tokens": ctx.get("tokens", 0),
        "fallbacks": state.get("fallbacks", []),
    }


def _evolve_output(state: State) -> dict[str, Any]:
    diff = state.get("diff", {})
    return {
        "superseded": len(diff.get("superseded", [])),
        "recategorised": len(diff.get("recategorised", [])),
        "intention_version": diff.get("intention", {}).get("to_version"),
    }


_OUTPUTS: dict[str, Callable[[State], dict[str, Any]]] = {
    "memorize": _memorize_output,
    "retrieve": _retrieve_output,
    "evolve": _evolve_output,
}


def _embed_function(embedder: Any) -> Callable[[Sequence[str]], np.ndarray]:
    instance = create_embedder(embedder) if isinstance(embedder, str) else embedder
    sync = getattr(instance, "embed_documents_sync", None)

    def embed(texts: Sequence[str]) -> np.ndarray:
        if sync is not None:
            return np.asarray(sync(list(texts)), dtype=np.float32)
        return np.asarray(asyncio.run(instance.embed_documents(list(texts))), dtype=np.float32)

    embed.embedder_id = getattr(instance, "embedder_id", "custom")  # type: ignore[attr-defined]
    return embed
