"""The model chain per step: configured provider -> MCP sampling -> offline (DESIGN §4).

Built on pydantic-ai's :class:`FallbackModel`: a source that fails (provider down, no key, the
client refused sampling) hands the request to the next one with a warning in the log, and the
response names the model that actually answered. A provider that cannot even be constructed
(unknown name, missing API key or SDK) is skipped at build time; both are reported as warnings
in the result of the operation (:meth:`~memory_core.llm.agents.HierarchyAgents.warnings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import structlog
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.fallback import FallbackModel

from memory_core.llm.availability import model_problem
from memory_core.llm.profiles import ModelProfile

__all__ = ["StepModel", "build_step_model"]

log = structlog.get_logger(__name__)


@dataclass
class StepModel:
    """The model one step runs with, and where it came from."""

    profile: ModelProfile
    model: Model
    sources: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    @property
    def offline_only(self) -> bool:
        """Whether only the built-in offline model is left to answer (it is always last)."""
        return len(self.sources) == 1

    def record(self) -> dict[str, Any]:
        return {**self.profile.record(), "chain": self.sources, "skipped": self.skipped}


def _source_name(model: Model) -> str:
    return f"{model.system}:{model.model_name}"


def _fall_back(exc: Exception) -> bool:
    # Any failure of one source is a reason to try the next; the agent still raises if all fail.
    log.warning(
        "model failed, falling back to the next source",
        error_type=type(exc).__name__,
        error=str(exc)[:200],
    )
    return True


def build_step_model(
    profile: ModelProfile,
    *,
    offline: Model,
    sampling: Model | None = None,
    use_sampling: bool = True,
) -> StepModel:
    """The chain for one step: the profile's provider (unless offline), then ``sampling``
    (the caller's model, e.g. an ``MCPSamplingModel``; skipped when ``use_sampling`` is off),
    then ``offline``.

    Never raises for an unusable provider: it is skipped with a warning, recorded in
    :attr:`StepModel.skipped`, and reported with every result
    (:meth:`~memory_core.llm.agents.HierarchyAgents.warnings`).
    """
    models: list[Model] = []
    skipped: list[dict[str, str]] = []
    if not profile.is_offline:
        problem = model_problem(profile.model)
        if problem is None:
            models.append(infer_model(profile.model))
        else:  # unknown provider, missing key or SDK: reported with every result, never silent
            log.warning(
                "configured model unavailable, using the next source",
                model=profile.model,
                step=profile.step,
                error=problem.reason,
                hint=problem.hint,
            )
            skipped.append({"model": profile.model, "reason": problem.reason, "hint": problem.hint})
    if sampling is not None and use_sampling:
        models.append(sampling)
    models.append(offline)
    sources = [_source_name(m) for m in models]
    model: Model = models[0] if len(models) == 1 else FallbackModel(*models, fallback_on=_fall_back)
    return StepModel(profile=profile, model=model, sources=sources, skipped=skipped)
