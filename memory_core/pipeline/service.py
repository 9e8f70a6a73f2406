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

This module holds creation and memorize / retrieve / evolve; the class gathers its other
parts from ``service_state`` (the shared state, meta, capabilities), ``revisions`` (pipeline
editing), ``runs`` (the run log, resume, stored steps) and ``layer_queries`` (read-only
queries).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from pydantic import BaseModel

from memory_core.config import LLMSettings
from memory_core.embed import create_embedder
from memory_core.errors import InvalidInputError, MemoirError, PipelineRunError
from memory_core.pipeline.async_service import AsyncMemoryService
from memory_core.pipeline.authorisation import Authorise
from memory_core.pipeline.contract import DurableRunner, Runner, SyncRunner
from memory_core.pipeline.creation import (
    DDL_VERSION,
    check_reopened_scope,
    check_role_profiles,
    taxonomy_from,
    version_hash,
)
from memory_core.pipeline.editing import default_pipelines, set_from_json, set_to_json, validate
from memory_core.pipeline.evolve_schedule import EvolveSchedule, evolve_due
from memory_core.pipeline.layer_queries import LayerQueries
from memory_core.pipeline.profiles import parse_profiles, redacted_summary
from memory_core.pipeline.resource_access import DEFAULT_MAX_RESOURCE_BYTES, ResourceAccess
from memory_core.pipeline.results import EvolveResult, MemorizeResult, RetrieveResult
from memory_core.pipeline.runs import PipelineRuns, evolve_output, memorize_output, retrieve_output
from memory_core.pipeline.scopes import ScopeSelector, ScopeSpec, SelectorPolicy
from memory_core.pipeline.steps import BUILTIN_STEPS, StepFn, resource_hash
from memory_core.redaction import redact_text
from memory_core.storage.layer import DdlMode, RevisionRow, RunRow, open_layer_store
from memory_core.tokens import TokenCounter, create_token_counter

__all__ = ["DDL_VERSION", "AsyncMemoryService", "MemoryService"]

log = structlog.get_logger(__name__)


class MemoryService(PipelineRuns, LayerQueries):
    """The synchronous memory layer. Create it with :meth:`create`."""

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
        evolve_schedule: EvolveSchedule | Mapping[str, Any] | None = None,
        authorise: Authorise | None = None,
        memoir_llm: LLMSettings | None = None,
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
            evolve_schedule: run a scope's evolve by itself after a memorize of it:
                ``{"every_memorizes": N, "min_interval_s": S}`` (either or both; see
                :mod:`memory_core.pipeline.evolve_schedule`). Default: only when called.
            authorise: a hook that sees each call's ``principal`` and scope selector before
                the scope model and boundary policy check it, and may narrow it or refuse
                (:mod:`memory_core.pipeline.authorisation`). Default: none.
            memoir_llm: memoir's ``[llm]`` settings (``load_settings().llm``), whose profiles
                ``llm_providers`` entries reuse with ``memoir_profile = "NAME"``.

        Raises:
            ConfigError: a bad scope model, taxonomy, profile, boundary, provider or URL
                prefix.
            ScopeMismatchError: the store was created with another scope model.
            SchemaError: ``validate`` mode and the tables are missing or differ.
        """
        spec = ScopeSpec.from_model(scope_model)
        schedule = EvolveSchedule.parse(evolve_schedule)
        taxonomy = taxonomy_from(categories)
        profiles = parse_profiles(llm_providers, memoir_llm)
        roles = dict(role_profiles or {})
        check_role_profiles(roles, profiles)
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
        check_reopened_scope(stored, spec)
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
            **({"evolve_schedule": schedule.describe()} if schedule else {}),
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
            evolve_schedule=schedule,
            authorise=authorise,
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
        principal: Any = None,
    ) -> MemorizeResult:
        """Store a conversation or a file (content or URI) and build its items, categories and
        intention. Idempotent on resource hash + pipeline revision.

        Raises:
            InvalidInputError: the scope misses a field, or no / several resources were given.
            AccessDeniedError: the authorisation hook refused the scope to ``principal``.
            PathNotAllowedError: the URI is outside ``allowed_roots`` (symlinks followed) or
                under no ``allowed_url_prefixes``; nothing is stored.
            NotFoundError: the URI cannot be read.
            PipelineRunError: a step failed (the run log names it).
        """
        full = self._authorised_scope("memorize", scope, principal)
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
            summarise=memorize_output,
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
            scheduled_evolve=self._scheduled_evolve(full, run_id),
        )

    def retrieve(
        self,
        scope_selector: ScopeSelector | Mapping[str, Any],
        query: str,
        *,
        top_k: int | None = None,
        keep: int | None = None,
        budget_tokens: int | None = None,
        principal: Any = None,
    ) -> RetrieveResult:
        """Hierarchical retrieval (intention → category → item) across the selected scopes.

        Raises:
            InvalidInputError: an empty query, or a selector the policy refuses (a missing
                field, ANY on a boundary field).
            AccessDeniedError: the authorisation hook refused a field to ``principal`` (it
                runs before the policy, which then checks what the hook let through).
            LimitExceededError: the selector expands to too many scope combinations.
            PipelineRunError: a step failed.
        """
        if not query or not query.strip():
            raise InvalidInputError("retrieve needs a non-empty query", hint="pass the question")
        allowed = self._authorised("retrieve", scope_selector, principal)
        selector = self.policy.compile(self.scope_spec, allowed)
        as_json = {k: (list(v) if v is not None else None) for k, v in selector.items()}
        scope_range = {k: ("ANY" if v is None else v) for k, v in as_json.items()}
        options = {"top_k": top_k, "keep": keep, "budget_tokens": budget_tokens}

        run_id, outcome = self._run(
            "retrieve",
            {"selector": as_json, "query": query, "options": options},
            input_summary={"query": query[:120], "chars": len(query)},
            scope_range=scope_range,
            summarise=retrieve_output,
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

    def evolve(
        self, scope: BaseModel | Mapping[str, Any], *, principal: Any = None
    ) -> EvolveResult:
        """Dedupe and refresh items, re-cluster categories, adjust the intention; return the diff.

        Raises:
            InvalidInputError: the scope misses a field.
            AccessDeniedError: the authorisation hook refused the scope to ``principal``.
            PipelineRunError: a step failed.
            DatabaseLockedError: another process on the store kept evolving this scope for
                longer than the wait (15 minutes).
        """
        full = self._authorised_scope("evolve", scope, principal)
        with (
            self._evolve_locks.hold(full, wait=True),
            self._evolve_leases.hold(full, wait=True),
        ):
            return self._evolve(full, {})

    def _evolve(self, full: dict[str, str], trigger: dict[str, Any]) -> EvolveResult:
        run_id, outcome = self._run(
            "evolve",
            {"scope": full, "options": {}},
            input_summary={"scope": full, **trigger},
            scope_range=full,
            summarise=evolve_output,
        )
        return EvolveResult(
            run_id=run_id,
            diff=outcome.state.get("diff", {}),
            pipeline_revision=int(outcome.state.get("pipeline_revision", self.pipeline_revision)),
        )

    def _scheduled_evolve(self, full: dict[str, str], memorize_run: str) -> dict[str, Any] | None:
        """Runs the scope's evolve when the schedule says it is due (after a memorize that
        stored something). Whatever goes wrong here is logged and reported as ``failed``: the
        memorize is stored already, and its caller gets its result."""
        if self.evolve_schedule is None:
            return None
        try:
            return self._evolve_if_due(self.evolve_schedule, full, memorize_run)
        except Exception as exc:  # the memorize's outermost edge: it stands, the cause is told
            log.exception(
                "scheduled evolve failed", scope=full, after_memorize=memorize_run,
                error=type(exc).__name__,
            )  # fmt: skip
            cause = exc.message if isinstance(exc, MemoirError) else f"{type(exc).__name__}: {exc}"
            return {"status": "failed", "run_id": None, "reason": redact_text(cause)}

    def _evolve_if_due(
        self, schedule: EvolveSchedule, full: dict[str, str], memorize_run: str
    ) -> dict[str, Any]:
        with self._evolve_locks.hold(full, wait=False) as held:
            if not held:
                return {"status": "skipped", "reason": "an evolve of this scope is running"}
            # read after taking the lock: an evolve that just finished is in the log
            check = evolve_due(schedule, self._run_tail.read(self.store.runs), full, self._clock())
            if not check.due:
                return {"status": "not_due", "reason": check.reason}
            # the lease is a write: taken only once the evolve is due
            with self._evolve_leases.hold(full, wait=False) as leased:
                if not leased:
                    return {"status": "skipped", "reason": "an evolve of this scope is running "
                            "in another process on this store"}  # fmt: skip
                # read again under the lease: another process's evolve may just have finished
                runs = self._run_tail.read(self.store.runs)
                check = evolve_due(schedule, runs, full, self._clock())
                if not check.due:
                    return {"status": "not_due", "reason": check.reason}
                trigger = {"trigger": "schedule", "after_memorize": memorize_run}
                try:
                    result = self._evolve(full, trigger)
                except PipelineRunError as exc:
                    return {"status": "failed", "run_id": exc.details.get("run_id"),
                            "reason": exc.message}  # fmt: skip
                return {"status": "ok", "run_id": result.run_id, "reason": check.reason}


def _embed_function(embedder: Any) -> Callable[[Sequence[str]], np.ndarray]:
    instance = create_embedder(embedder) if isinstance(embedder, str) else embedder
    sync = getattr(instance, "embed_documents_sync", None)

    def embed(texts: Sequence[str]) -> np.ndarray:
        if sync is not None:
            return np.asarray(sync(list(texts)), dtype=np.float32)
        return np.asarray(asyncio.run(instance.embed_documents(list(texts))), dtype=np.float32)

    embed.embedder_id = getattr(instance, "embedder_id", "custom")  # type: ignore[attr-defined]
    return embed
