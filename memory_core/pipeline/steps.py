"""The registry of built-in steps: impl name -> step function (seed 004 §8.1).

The steps live in :mod:`~memory_core.pipeline.memorize_steps`,
:mod:`~memory_core.pipeline.retrieve_steps` and :mod:`~memory_core.pipeline.evolve_steps`; what
they receive is in :mod:`~memory_core.pipeline.step_context`.
"""

from __future__ import annotations

from memory_core.pipeline.evolve_steps import (
    adjust_intention,
    emit_diff,
    persist_evolution,
    re_cluster_categories,
    refresh_items,
    select_targets,
)
from memory_core.pipeline.memorize_steps import (
    categorize_items,
    dedupe_merge,
    extract_items,
    infer_intention,
    ingest_resource,
    persist_index,
    preprocess_multimodal,
    resource_hash,
)
from memory_core.pipeline.retrieve_steps import (
    build_context,
    recall_items,
    route_category,
    route_intention,
    sufficiency_check,
    verify_rerank,
)
from memory_core.pipeline.step_context import LLMHandle, StepContext, StepFn

__all__ = ["BUILTIN_STEPS", "LLMHandle", "StepContext", "StepFn", "resource_hash"]


BUILTIN_STEPS: dict[str, StepFn] = {
    fn.__name__: fn
    for fn in (
        ingest_resource,
        preprocess_multimodal,
        extract_items,
        dedupe_merge,
        categorize_items,
        infer_intention,
        persist_index,
        route_intention,
        sufficiency_check,
        route_category,
        recall_items,
        verify_rerank,
        build_context,
        select_targets,
        refresh_items,
        re_cluster_categories,
        adjust_intention,
        persist_evolution,
        emit_diff,
    )
}
