"""The state a memory layer service holds, its ``service_meta`` and its capabilities."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from memory_core.pipeline.authorisation import Authorise, Operation, authorised_selector
from memory_core.pipeline.contract import Runner
from memory_core.pipeline.editing import PipelineSet
from memory_core.pipeline.evolve_schedule import (
    EvolveSchedule,
    RunLogTail,
    ScopeLeases,
    ScopeLocks,
)
from memory_core.pipeline.profiles import LayerProfile
from memory_core.pipeline.resource_access import ResourceAccess
from memory_core.pipeline.scopes import ScopeSelector, ScopeSpec, SelectorPolicy
from memory_core.pipeline.steps import StepContext, StepFn
from memory_core.storage.layer import LayerStore
from memory_core.tokens import TokenCounter

__all__ = ["ServiceState"]


class ServiceState:
    """What every part of :class:`~memory_core.pipeline.service.MemoryService` shares: its
    store, scope model, taxonomy, profiles, policy, runner, registry, meta and pipelines."""

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
        evolve_schedule: EvolveSchedule | None = None,
        authorise: Authorise | None = None,
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
        self.evolve_schedule = evolve_schedule
        self._evolve_locks = ScopeLocks()  # one evolve per scope at a time in this process
        self._evolve_leases = ScopeLeases(store)  # and across the processes on the store
        self._run_tail = RunLogTail(evolve_schedule.scan_runs if evolve_schedule else 0)
        self._authorise = authorise
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

    def _authorised(
        self, operation: Operation, selector: ScopeSelector | Mapping[str, Any], principal: Any
    ) -> ScopeSelector:
        """The selector after the authorisation hook (as given when there is none).

        Raises:
            AccessDeniedError: the hook refused a field.
        """
        sel = selector if isinstance(selector, ScopeSelector) else ScopeSelector(selector)
        return authorised_selector(self._authorise, operation, sel, principal)

    def _authorised_scope(
        self, operation: Operation, scope: BaseModel | Mapping[str, Any], principal: Any
    ) -> dict[str, str]:
        """One full scope, after the authorisation hook and the scope model's checks.

        Raises:
            AccessDeniedError: the hook refused a field.
            InvalidInputError: the scope misses a field (or the hook left several values).
        """
        if self._authorise is None:
            return self.scope_spec.scope(scope)
        raw = scope.model_dump() if isinstance(scope, BaseModel) else dict(scope)
        sel = self._authorised(operation, ScopeSelector(raw), principal)
        single = {
            k: v[0] if isinstance(v, tuple) and len(v) == 1 else v for k, v in sel.values.items()
        }
        return self.scope_spec.scope(single)

    def capabilities(self) -> set[str]:
        return {"llm", "db_write", *(["vector"] if self.store.vector_capable else [])}

    def close(self) -> None:
        self.store.close()
        close_runner = getattr(self.runner, "close", None)  # Temporal's worker and dev server
        if close_runner is not None:
            close_runner()
