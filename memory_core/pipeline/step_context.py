"""What a step receives besides the state: the service context and its LLM handle.

A step is ``fn(ctx, spec, state, llm) -> produced``: it reads JSON values from ``state``, may
use the store, embedder and taxonomy through ``ctx``, and returns the JSON values it produces.
``llm`` is the step's resolved profile: offline steps use :mod:`memory_core.pipeline.extraction`,
others a typed pydantic-ai call.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory_core.pipeline.contract import State, StepSpec
from memory_core.pipeline.llm_calls import (
    run_agent,
)
from memory_core.pipeline.profiles import LayerProfile
from memory_core.pipeline.resource_access import ResourceAccess
from memory_core.pipeline.scopes import ScopeSpec, SelectorPolicy
from memory_core.storage.layer import (
    LayerStore,
    ScopeFilter,
)
from memory_core.tokens import TokenCounter

__all__ = ["LLMHandle", "StepContext", "StepFn", "as_vector", "exact_filter"]


_EMBED_CACHE = 20_000


@dataclass
class LLMHandle:
    """The step's resolved profile, and the usage of its calls (for the run log)."""

    profile: LayerProfile
    usage: list[dict[str, Any]] = field(default_factory=list)

    @property
    def offline(self) -> bool:
        return self.profile.is_offline

    def call(self, output_type: Any, payload: Any) -> Any:
        output, usage = run_agent(self.profile, output_type, payload)
        self.usage.append(usage)
        return output


@dataclass
class StepContext:
    """What steps may use besides the state: store, scope schema, embedder, taxonomy, and the
    resources this process may read (its own configuration, never the run's)."""

    store: LayerStore
    scope_spec: ScopeSpec
    embed: Callable[[Sequence[str]], np.ndarray]
    taxonomy: list[dict[str, str]]
    policy: SelectorPolicy
    tokens: TokenCounter
    clock: Callable[[], float]
    resources: ResourceAccess
    _category_vectors: np.ndarray | None = None
    _cache: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict)

    def category_vectors(self) -> np.ndarray:
        if self._category_vectors is None:
            self._category_vectors = self.embed(
                [f"{c['name']}. {c['description']}" for c in self.taxonomy]
            )
        return self._category_vectors

    def embed_cached(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of texts that repeat across runs (category and intention texts)."""
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._cache]
        if missing:
            fresh = self.embed([texts[i] for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                self._cache[keys[i]] = vector
        vectors = [self._cache[k] for k in keys]
        for k in keys:
            self._cache.move_to_end(k)
        while len(self._cache) > _EMBED_CACHE:
            self._cache.popitem(last=False)
        return np.vstack(vectors) if vectors else np.zeros((0, 1), dtype=np.float32)


StepFn = Callable[[StepContext, StepSpec, State, LLMHandle], Mapping[str, Any]]


def exact_filter(scope: Mapping[str, str]) -> ScopeFilter:
    return {k: (v,) for k, v in scope.items()}


def as_vector(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)
