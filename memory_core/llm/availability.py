"""Whether a configured model can be used here, and what to do when it cannot.

A ``'provider:model'`` string needs the provider's SDK (an extra of memoir: ``pip install
'memoir-mcp[openai]'``) and usually an API key in the environment. pydantic-ai checks both when
the model is built; :func:`model_problem` turns its failure into one sentence with the fix, so a
configured provider that cannot be used is reported (a warning in every result, a doctor
finding, a line at server start), never silently replaced by the offline model.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memory_core.config import LLMSettings

__all__ = ["MEMOIR_EXTRAS", "ModelProblem", "llm_problems", "model_problem"]

# The provider extras of memoir-mcp (pyproject.toml), by the pydantic-ai-slim extra they install.
MEMOIR_EXTRAS = frozenset(
    {"openai", "anthropic", "google", "groq", "mistral", "bedrock", "cohere", "huggingface"}
)
_SLIM_EXTRA = re.compile(r"pydantic-ai-slim\[([\w-]+)\]")
_ENV_VAR = re.compile(r"`([A-Z][A-Z0-9_]+_(?:API_KEY|KEY|TOKEN))`")


@dataclass(frozen=True)
class ModelProblem:
    """Why ``model`` cannot be used, and the fix."""

    model: str
    reason: str
    hint: str

    def sentence(self, steps: list[str] | None = None) -> str:
        used = f"; {', '.join(steps)} used the offline model" if steps else ""
        return f"llm model {self.model!r} cannot be used: {self.reason}{used} ({self.hint})"


def _describe(model: str, exc: Exception) -> ModelProblem:
    text = str(exc)
    extra = _SLIM_EXTRA.search(text)
    if isinstance(exc, ImportError) and extra is not None:
        name = extra.group(1)
        install = (
            f"pip install 'memoir-mcp[{name}]'"
            if name in MEMOIR_EXTRAS
            else f"pip install 'pydantic-ai-slim[{name}]'"
        )
        return ModelProblem(model, f"the {name} SDK is not installed", install)
    key = _ENV_VAR.search(text)
    if key is not None:
        return ModelProblem(
            model, f"{key.group(1)} is not set", f"set {key.group(1)} in the server's environment"
        )
    if text.startswith("Unknown model"):
        return ModelProblem(
            model,
            text.split("\n")[0][:200],
            "use a pydantic-ai 'provider:model' string, or llm.model = 'offline'",
        )
    return ModelProblem(
        model, f"{type(exc).__name__}: {text[:200]}", "check [llm] in memoir.toml and the API key"
    )


@functools.lru_cache(maxsize=64)
def model_problem(model: str) -> ModelProblem | None:
    """None when ``model`` can be built here (SDK present, key set), else what is wrong.

    Cached per process: installing an SDK or setting a key takes a restart, as with any server.
    """
    from pydantic_ai.models import infer_model

    try:
        infer_model(model)
    except Exception as exc:  # ImportError, UserError, provider errors: all mean "unusable"
        return _describe(model, exc)
    return None


def llm_problems(llm: LLMSettings) -> list[tuple[ModelProblem, list[str]]]:
    """Each configured model that cannot be used here, with the steps it was configured for
    (empty: every configured model is usable).

    Raises:
        ConfigError: the [llm] profiles are malformed.
    """
    from memory_core.llm.profiles import resolve_profiles

    steps: dict[ModelProblem, list[str]] = {}
    for step, profile in resolve_profiles(llm).items():
        if profile.is_offline:
            continue
        problem = model_problem(profile.model)
        if problem is not None:
            steps.setdefault(problem, []).append(step)
    return list(steps.items())
