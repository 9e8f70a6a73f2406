"""Default pipelines, static validation and edits (seed 004 §8). Pure.

A pipeline set (memorize, retrieve, evolve) is plain data. Every edit returns a new set, which
:func:`validate` checks before the service stores it as a revision: every step's ``requires``
is produced by an earlier enabled step (or is an input of the pipeline), its LLM profile exists,
its capabilities are available, its ``impl`` is registered and its ``step_id`` is unique.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from memory_core.errors import ConfigError, NotFoundError
from memory_core.pipeline.contract import Capability, Pipeline, PipelineName, StepSpec
from memory_core.pipeline.profiles import resolve_step_profile

__all__ = [
    "PIPELINE_INPUTS",
    "PipelineSet",
    "default_pipelines",
    "diff_sets",
    "edit_config",
    "edit_insert",
    "edit_remove",
    "edit_replace",
    "find_step",
    "set_from_json",
    "set_to_json",
    "step",
    "validate",
]

PipelineSet = dict[PipelineName, Pipeline]

PIPELINE_INPUTS: dict[PipelineName, frozenset[str]] = {
    "memorize": frozenset({"scope", "resource_input", "content_hash", "options"}),
    "retrieve": frozenset({"selector", "query", "options", "policy"}),
    "evolve": frozenset({"scope", "options"}),
}


def step(
    step_id: str,
    impl: str,
    role: str,
    requires: Iterable[str] = (),
    produces: Iterable[str] = (),
    capabilities: Iterable[Capability] = (),
    **config: Any,
) -> StepSpec:
    """A :class:`StepSpec` from short arguments (``config`` as keywords)."""
    return StepSpec(
        step_id=step_id,
        impl=impl,
        role=role,
        requires=frozenset(requires),
        produces=frozenset(produces),
        capabilities=frozenset(capabilities),
        config=dict(config),
    )


def default_pipelines() -> PipelineSet:
    """The built-in pipelines of §8.1."""
    memorize = (
        step("ingest_resource", "ingest_resource", "ingest", ["scope", "resource_input"],
             ["resource", "text", "segments"], ["db_write"]),
        step("preprocess_multimodal", "preprocess_multimodal", "preprocess", ["resource"],
             ["text", "segments", "artifacts", "missing_capabilities"]),
        step("extract_items", "extract_items", "extract", ["text", "resource", "segments"],
             ["candidates"], ["llm"], max_items=40),
        step("dedupe_merge", "dedupe_merge", "dedupe", ["candidates"], ["item_plan"],
             merge_threshold=0.92),
        step("categorize_items", "categorize_items", "categorize", ["item_plan"],
             ["assignments"], ["llm"]),
        step("infer_intention", "infer_intention", "intention", ["item_plan"], ["intention"],
             ["llm"]),
        step("persist_index", "persist_index", "persist", ["item_plan", "assignments",
             "intention"], ["persisted"], ["db_write"], anchors=3),
    )  # fmt: skip
    retrieve = (
        step("route_intention", "route_intention", "route", ["selector", "query"],
             ["intention_hits"]),
        step("sufficiency_intention", "sufficiency_check", "verify", ["intention_hits"],
             ["sufficient", "sufficiency"], ["llm"], layer="intention"),
        step("route_category", "route_category", "route", ["selector", "query"],
             ["category_hits"], top_categories=3),
        step("sufficiency_category", "sufficiency_check", "verify", ["category_hits"],
             ["sufficient", "sufficiency"], ["llm"], layer="category", threshold=0.55),
        step("recall_items", "recall_items", "recall", ["selector", "query", "category_hits"],
             ["candidates", "fallbacks"], top_k=50),
        step("verify_rerank", "verify_rerank", "verify", ["candidates"], ["ranked"], ["llm"],
             keep=10),
        step("build_context", "build_context", "context", ["ranked"], ["context"],
             budget_tokens=1200),
    )  # fmt: skip
    evolve = (
        step("select_targets", "select_targets", "select", ["scope"], ["targets"]),
        step("refresh_items", "refresh_items", "dedupe", ["targets"], ["evolve_plan"],
             merge_threshold=0.9),
        step("re_cluster_categories", "re_cluster_categories", "categorize",
             ["targets", "evolve_plan"], ["reassign"], ["llm"]),
        step("adjust_intention", "adjust_intention", "intention", ["targets", "evolve_plan"],
             ["intention"], ["llm"]),
        step("persist_evolution", "persist_evolution", "persist",
             ["evolve_plan", "reassign", "intention"], ["persisted"], ["db_write"], anchors=3),
        step("emit_diff", "emit_diff", "report", ["persisted"], ["diff"]),
    )  # fmt: skip
    return {
        "memorize": Pipeline("memorize", memorize),
        "retrieve": Pipeline("retrieve", retrieve),
        "evolve": Pipeline("evolve", evolve),
    }


def validate(
    pipelines: PipelineSet,
    *,
    registered: Iterable[str],
    profiles: Iterable[str],
    role_profiles: Mapping[str, str],
    capabilities: Iterable[str],
) -> None:
    """Refuse a pipeline set that cannot run.

    Raises:
        ConfigError: naming the step and the broken dependency, profile, capability or impl.
    """
    impls = set(registered)
    names = set(profiles)
    caps = set(capabilities)
    seen_ids: dict[str, str] = {}
    for name, pipeline in pipelines.items():
        available = set(PIPELINE_INPUTS[name])
        for spec in pipeline.steps:
            if spec.step_id in seen_ids:
                raise ConfigError(
                    f"step id {spec.step_id!r} is used twice ({seen_ids[spec.step_id]} and {name})",
                    hint="give the new step a unique step_id",
                )
            seen_ids[spec.step_id] = name
            if spec.impl not in impls:
                raise ConfigError(
                    f"step {spec.step_id!r} in {name} uses the unknown impl {spec.impl!r}",
                    hint="register it first with service.register_step(impl, function); known: "
                    + ", ".join(sorted(impls)),
                )
            if spec.retries < 0 or (spec.timeout_s is not None and spec.timeout_s <= 0):
                raise ConfigError(
                    f"step {spec.step_id!r} has retries={spec.retries}, timeout_s={spec.timeout_s}",
                    hint="retries >= 0 and timeout_s > 0 (or None)",
                )
            if not spec.enabled:
                continue
            missing = sorted(spec.requires - available)
            if missing:
                raise ConfigError(
                    f"step {spec.step_id!r} in {name} requires {missing}, which no earlier "
                    f"enabled step produces (available: {sorted(available)})",
                    hint="insert a step that produces it before this one, or keep the step "
                    "that did",
                )
            profile = resolve_step_profile(spec.config, spec.role, role_profiles)
            if "llm" in spec.capabilities and profile not in names:
                raise ConfigError(
                    f"step {spec.step_id!r} in {name} uses the llm profile {profile!r}, "
                    f"which is not defined (profiles: {sorted(names)})",
                    hint="add it to llm_providers or set llm_profile to a defined profile",
                )
            lacking = sorted(set(spec.capabilities) - caps)
            if lacking:
                raise ConfigError(
                    f"step {spec.step_id!r} in {name} needs the capabilities {lacking}, "
                    f"which this service does not have (available: {sorted(caps)})",
                    hint="configure a vector_index, or remove the step",
                )
            available |= spec.produces


def find_step(pipelines: PipelineSet, step_id: str) -> tuple[PipelineName, int]:
    """Raises NotFoundError: no step has this id (the message lists them)."""
    for name, pipeline in pipelines.items():
        for index, spec in enumerate(pipeline.steps):
            if spec.step_id == step_id:
                return name, index
    known = [s.step_id for p in pipelines.values() for s in p.steps]
    raise NotFoundError(
        f"no pipeline step {step_id!r}",
        hint="use one of " + ", ".join(known),
    )


def _with_steps(pipelines: PipelineSet, name: PipelineName, steps: list[StepSpec]) -> PipelineSet:
    out = dict(pipelines)
    out[name] = Pipeline(name, tuple(steps))
    return out


_SPEC_FIELDS = {"retries", "timeout_s", "enabled"}


def edit_config(pipelines: PipelineSet, step_id: str, changes: Mapping[str, Any]) -> PipelineSet:
    """Merge ``changes`` into a step's config (``retries``/``timeout_s``/``enabled`` set the
    step's own fields; a value of ``None`` removes a config key)."""
    name, index = find_step(pipelines, step_id)
    steps = list(pipelines[name].steps)
    spec = steps[index]
    config = dict(spec.config)
    fields: dict[str, Any] = {}
    for key, value in changes.items():
        if key in _SPEC_FIELDS:
            fields[key] = value
        elif value is None:
            config.pop(key, None)
        else:
            config[key] = value
    steps[index] = replace(spec, config=config, **fields)
    return _with_steps(pipelines, name, steps)


def edit_insert(pipelines: PipelineSet, anchor: str, new: StepSpec, *, after: bool) -> PipelineSet:
    name, index = find_step(pipelines, anchor)
    steps = list(pipelines[name].steps)
    steps.insert(index + 1 if after else index, new)
    return _with_steps(pipelines, name, steps)


def edit_replace(pipelines: PipelineSet, step_id: str, new: StepSpec) -> PipelineSet:
    name, index = find_step(pipelines, step_id)
    steps = list(pipelines[name].steps)
    steps[index] = new
    return _with_steps(pipelines, name, steps)


def edit_remove(pipelines: PipelineSet, step_id: str, *, disable_only: bool) -> PipelineSet:
    name, index = find_step(pipelines, step_id)
    steps = list(pipelines[name].steps)
    if disable_only:
        steps[index] = replace(steps[index], enabled=False)
    else:
        del steps[index]
    return _with_steps(pipelines, name, steps)


def _step_json(spec: StepSpec) -> dict[str, Any]:
    return {
        "step_id": spec.step_id,
        "impl": spec.impl,
        "role": spec.role,
        "requires": sorted(spec.requires),
        "produces": sorted(spec.produces),
        "capabilities": sorted(spec.capabilities),
        "config": dict(spec.config),
        "enabled": spec.enabled,
        "retries": spec.retries,
        "timeout_s": spec.timeout_s,
    }


def set_to_json(pipelines: PipelineSet) -> dict[str, Any]:
    return {name: [_step_json(s) for s in p.steps] for name, p in pipelines.items()}


def set_from_json(data: Mapping[str, Any]) -> PipelineSet:
    out: PipelineSet = {}
    for name in ("memorize", "retrieve", "evolve"):
        steps = tuple(
            StepSpec(
                step_id=s["step_id"],
                impl=s["impl"],
                role=s["role"],
                requires=frozenset(s["requires"]),
                produces=frozenset(s["produces"]),
                capabilities=frozenset(s["capabilities"]),
                config=dict(s["config"]),
                enabled=bool(s["enabled"]),
                retries=int(s["retries"]),
                timeout_s=s["timeout_s"],
            )
            for s in data[name]
        )
        out[name] = Pipeline(name, steps)  # type: ignore[index]
    return out


def diff_sets(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """What changed between two JSON pipeline sets, per pipeline: added, removed, changed
    (field by field) and the new order when it moved."""
    out: dict[str, Any] = {}
    for name in ("memorize", "retrieve", "evolve"):
        before = {s["step_id"]: s for s in old.get(name, [])}
        after = {s["step_id"]: s for s in new.get(name, [])}
        changed: dict[str, dict[str, Any]] = {}
        for step_id in before.keys() & after.keys():
            fields = {
                key: {"from": before[step_id][key], "to": after[step_id][key]}
                for key in after[step_id]
                if before[step_id].get(key) != after[step_id][key]
            }
            if fields:
                changed[step_id] = fields
        entry: dict[str, Any] = {}
        added = [s for s in after if s not in before]
        removed = [s for s in before if s not in after]
        if added:
            entry["added"] = added
        if removed:
            entry["removed"] = removed
        if changed:
            entry["changed"] = dict(sorted(changed.items()))
        common_before = [s for s in before if s in after]
        common_after = [s for s in after if s in before]
        if common_before != common_after:
            entry["order"] = list(after)
        if entry:
            out[name] = entry
    return out
