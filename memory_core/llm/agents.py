"""pydantic-ai agents for the hierarchy steps: classify, select (traverse), summarise, answer.

Every call is an :class:`Agent` with a pydantic output type asked for as JSON text
(``PromptedOutput``), which every source can produce: provider models, MCP sampling (text only)
and the offline ``FunctionModel``. The schema is the first validator; output validators add the
rules a schema cannot say (exactly N distinct selections, citations among the given chunks) and
raise :class:`ModelRetry` with a clarified instruction, up to the profile's retries (default 3).

Classification below the global category cap takes any name; at the cap its output type is a
``Literal`` of the existing names, so the model is forced to choose (memoirAI Requirement 2).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, cast

import structlog
from pydantic import BaseModel, Field, create_model
from pydantic_ai import Agent, ModelRetry, PromptedOutput
from pydantic_ai.exceptions import AgentRunError, UserError
from pydantic_ai.settings import ModelSettings

from memory_core.errors import ModelError
from memory_core.llm import prompts
from memory_core.llm.chain import StepModel
from memory_core.llm.offline import OFFLINE_MODEL_NAME

__all__ = [
    "AnswerOutput",
    "CallOutcome",
    "ClassifyOutput",
    "HierarchyAgents",
    "SelectedCategory",
    "SummaryOutput",
    "forced_classify_type",
    "selection_type",
]

log = structlog.get_logger(__name__)
T = TypeVar("T", bound=BaseModel)
MAX_NEW_NAME_CHARS = 80


class ClassifyOutput(BaseModel):
    """The category for a chunk at one level."""

    category: str = Field(
        description="An existing category name copied exactly, or a new name of 1-4 words."
    )
    is_new: bool = Field(False, description="True when naming a new category.")


class SelectedCategory(BaseModel):
    category: str
    ranked_relevance: int | None = Field(None, ge=1, le=10)
    confidence: float | None = Field(None, ge=0, le=1)


class SummaryOutput(BaseModel):
    """A summary of one part of the retrieved passages."""

    summary: str = Field(description="The condensed passages, within the requested length.")


class AnswerOutput(BaseModel):
    """The answer to the question, from the passages only."""

    answer: str = Field(description="The answer, or a plain statement that it is not known.")
    cited_chunk_ids: list[str] = Field(
        default_factory=list, description="Chunk ids of the passages the answer uses."
    )


def forced_classify_type(names: Sequence[str]) -> type[BaseModel]:
    """The classification output when no new category may be created: a ``Literal`` choice."""
    choice: Any = Literal[tuple(dict.fromkeys(names))]
    return create_model(  # type: ignore[call-overload,no-any-return]
        "ForcedClassifyOutput",
        __doc__="Choose one of the existing categories (the category limit is reached).",
        category=(choice, Field(description="One of the existing category names, exactly.")),
    )


def selection_type(options: Sequence[str]) -> type[BaseModel]:
    """The traversal output: categories chosen among ``options`` (a ``Literal``)."""
    choice: Any = Literal[tuple(dict.fromkeys(options))]
    item = create_model(  # type: ignore[call-overload]
        "SelectedCategory",
        category=(choice, Field(description="One of the listed category names, exactly.")),
        ranked_relevance=(int | None, Field(None, ge=1, le=10)),
        confidence=(float | None, Field(None, ge=0, le=1)),
    )
    return create_model(  # type: ignore[call-overload,no-any-return]
        "CategorySelection",
        __doc__="The chosen categories, best first.",
        selected=(list[item], Field(min_length=1)),  # type: ignore[valid-type]
    )


@dataclass
class CallOutcome(Generic[T]):
    output: T
    model_name: str
    requests: int
    input_tokens: int
    output_tokens: int


@dataclass
class AgentStats:
    """What the agents did during one operation (logged with the run)."""

    calls: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0
    model_time_s: float = 0.0
    models_used: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "llm_calls": dict(self.calls),
            "llm_requests": dict(self.requests),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "model_time_s": round(self.model_time_s, 6),
            "models_used": self.models_used,
        }


class HierarchyAgents:
    """Runs the hierarchy's LLM steps on their model chains and keeps the statistics.

    Args:
        models: the :class:`StepModel` for each step (classify, traverse, summarise, answer).
    """

    def __init__(self, models: Mapping[str, StepModel]) -> None:
        self.models = dict(models)
        self.stats = AgentStats()

    def reset_stats(self) -> AgentStats:
        stats, self.stats = self.stats, AgentStats()
        return stats

    def warnings(self) -> list[str]:
        """What the caller must know about the models: a configured model that could not be
        used (one sentence per model, with the fix), and a step that fell back to the offline
        model at run time because the sources before it failed."""
        skipped: dict[tuple[str, str, str], list[str]] = {}
        for step, step_model in self.models.items():
            for entry in step_model.skipped:
                key = (entry["model"], entry["reason"], entry.get("hint", ""))
                skipped.setdefault(key, []).append(step)
        out = [
            f"llm model {model!r} cannot be used: {reason}; {', '.join(steps)} used the "
            f"offline model ({hint})"
            for (model, reason, hint), steps in skipped.items()
        ]
        for step, used in self.stats.models_used.items():
            sources = self.models[step].sources
            if len(sources) > 1 and OFFLINE_MODEL_NAME in used:
                out.append(
                    f"the {step} step fell back to the offline model: "
                    f"{', '.join(sources[:-1])} failed (the server log has the error)"
                )
        return out

    async def _run(
        self,
        step: str,
        output_type: type[T],
        prompt: str,
        instructions: str,
        validate: Callable[[Any], Any] | None = None,
    ) -> CallOutcome[T]:
        step_model = self.models[step]
        agent: Agent[None, T] = Agent(
            output_type=PromptedOutput(output_type),
            instructions=instructions,
            retries=step_model.profile.retries,
            name=f"memoir-{step}",
        )
        if validate is not None:
            agent.output_validator(validate)
        started = time.perf_counter()
        try:
            result = await agent.run(
                prompt,
                model=step_model.model,
                model_settings=cast(ModelSettings, step_model.profile.model_settings()),
            )
        except (AgentRunError, UserError, ExceptionGroup) as exc:
            raise ModelError(
                f"the {step} step failed on every model ({', '.join(step_model.sources)}): "
                f"{_describe(exc)}",
                hint="check the model configuration ([llm] in memoir.toml) and its API key, or "
                "set llm.model = 'offline' to use the built-in offline model",
                details={"step": step, "chain": step_model.sources},
            ) from exc
        finally:
            self.stats.model_time_s += time.perf_counter() - started
        usage = result.usage
        model_name = result.response.model_name or step_model.sources[-1]
        self.stats.calls[step] += 1
        self.stats.requests[step] += usage.requests
        self.stats.input_tokens += usage.input_tokens or 0
        self.stats.output_tokens += usage.output_tokens or 0
        used = self.stats.models_used.setdefault(step, [])
        if model_name not in used:
            used.append(model_name)
        return CallOutcome(
            result.output,
            model_name,
            usage.requests,
            usage.input_tokens or 0,
            usage.output_tokens or 0,
        )

    async def classify(
        self,
        *,
        text: str,
        level: int,
        depth: int,
        path: Sequence[str],
        options: Sequence[str],
        allow_new: bool,
    ) -> CallOutcome[BaseModel]:
        """One level of classification. Output has ``category`` (and ``is_new`` if allowed).

        Raises:
            ModelError: no model produced a valid answer within the retries.
        """
        prompt = prompts.classify_prompt(
            text=text, level=level, depth=depth, path=path, options=options, allow_new=allow_new
        )
        if not allow_new:
            forced = forced_classify_type(options)
            return await self._run("classify", forced, prompt, prompts.CLASSIFY_INSTRUCTIONS)

        def check(output: ClassifyOutput) -> ClassifyOutput:
            name = " ".join(output.category.split())
            if not any(ch.isalnum() for ch in name):
                raise ModelRetry(
                    "The category name is empty. Reply with an existing category name copied "
                    "exactly, or a new name of one to four words."
                )
            if len(name) > MAX_NEW_NAME_CHARS:
                raise ModelRetry(
                    f"The category name has {len(name)} characters; use at most "
                    f"{MAX_NEW_NAME_CHARS} (one to four words)."
                )
            return output.model_copy(update={"category": name})

        return await self._run(  # type: ignore[return-value]
            "classify", ClassifyOutput, prompt, prompts.CLASSIFY_INSTRUCTIONS, check
        )

    async def select(
        self, *, question: str, level: int, options: Sequence[str], count: int
    ) -> CallOutcome[BaseModel]:
        """Choose exactly ``count`` distinct categories among ``options``.

        Raises:
            ModelError: no model produced a valid selection within the retries.
        """
        output_type = selection_type(options)
        prompt = prompts.select_prompt(question=question, level=level, options=options, count=count)

        def check(output: Any) -> Any:
            names = [s.category for s in output.selected]
            if len(set(names)) != len(names):
                raise ModelRetry(
                    f"You selected a category twice ({names}). Select exactly {count} "
                    "different categories from the list."
                )
            if len(names) != count:
                raise ModelRetry(
                    f"You selected {len(names)} categories; select exactly {count} different "
                    "categories from the list, best first."
                )
            return output

        return await self._run("traverse", output_type, prompt, prompts.SELECT_INSTRUCTIONS, check)

    async def summarise(
        self, *, question: str, text: str, target_tokens: int, part: int, parts: int
    ) -> CallOutcome[SummaryOutput]:
        """Summarise one part of the candidates to about ``target_tokens``.

        Raises:
            ModelError: no model produced a valid summary within the retries.
        """
        prompt = prompts.summarise_prompt(
            question=question, text=text, target_tokens=target_tokens, part=part, parts=parts
        )

        def check(output: SummaryOutput) -> SummaryOutput:
            if not output.summary.strip():
                raise ModelRetry("The summary is empty; summarise the passages given.")
            return output

        return await self._run(
            "summarise", SummaryOutput, prompt, prompts.SUMMARISE_INSTRUCTIONS, check
        )

    async def answer(
        self, *, question: str, passages: Sequence[dict[str, str]]
    ) -> CallOutcome[AnswerOutput]:
        """The final answer from ``passages`` (each with chunk_id, category_path, text).

        Raises:
            ModelError: no model produced a valid answer within the retries.
        """
        known = {p["chunk_id"] for p in passages}
        prompt = prompts.answer_prompt(question=question, passages=passages)

        def check(output: AnswerOutput) -> AnswerOutput:
            if not output.answer.strip():
                raise ModelRetry("The answer is empty; answer the question from the passages.")
            unknown = [c for c in output.cited_chunk_ids if c not in known]
            if unknown:
                raise ModelRetry(
                    f"You cited chunk ids that were not given: {unknown[:5]}. Cite only ids "
                    "shown in square brackets before each passage."
                )
            return output

        return await self._run("answer", AnswerOutput, prompt, prompts.ANSWER_INSTRUCTIONS, check)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)[:400]
    return f"{type(exc).__name__}: {str(exc)[:300]}"
