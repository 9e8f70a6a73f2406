"""Fixtures for the hierarchy tests: real SQLite stores in tmp_path, scripted pydantic-ai models.

:class:`Script` is a ``FunctionModel`` whose behaviour is given per task (classify, select,
summarise, answer) by plain functions over the prompt's JSON context, and which records every
request, so tests can script any model behaviour and count the calls.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic_ai.models
import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memory_core.config import Settings, load_settings
from memory_core.embed import create_embedder
from memory_core.llm.prompts import CONTEXT_OPEN, extract_context
from memory_core.service import Memoir

DATA = Path(__file__).resolve().parents[1] / "data"
Handler = Callable[[dict[str, Any]], Any]


@pytest.fixture(autouse=True)
def no_real_model_requests() -> Iterator[None]:
    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    yield
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_settings(tmp_path: Path, **hierarchy: Any) -> Settings:
    overrides: dict[str, Any] = {"hierarchy": hierarchy} if hierarchy else {}
    return load_settings(overrides, cwd=tmp_path, environ={})


async def open_memoir(tmp_path: Path, settings: Settings | None = None) -> Memoir:
    return await Memoir.open(
        f"sqlite:///{tmp_path}/m.db",
        settings=settings or make_settings(tmp_path),
        embedder=create_embedder("hash:384"),
    )


@pytest.fixture
async def memoir(tmp_path: Path) -> AsyncIterator[Memoir]:
    opened = await open_memoir(tmp_path)
    yield opened
    await opened.close()


class Script:
    """A scripted model: ``handlers[task](context)`` returns the JSON-able output, or a
    ``str`` to send as raw text (to script invalid output)."""

    def __init__(self, name: str = "scripted", **handlers: Handler) -> None:
        self.handlers = handlers
        self.calls: list[dict[str, Any]] = []
        self.requests: list[tuple[str, int]] = []  # (task, attempt number within the run)
        self.model = FunctionModel(self._respond, model_name=name)

    def tasks(self, task: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["task"] == task]

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        context: dict[str, Any] | None = None
        attempts = 0
        for message in messages:
            if isinstance(message, ModelRequest):
                attempts += 1
                for part in message.parts:
                    if (
                        context is None
                        and isinstance(part, UserPromptPart)
                        and isinstance(part.content, str)
                        and CONTEXT_OPEN in part.content
                    ):
                        context = extract_context(part.content)
        assert context is not None, "every memoir prompt carries a context block"
        task = context["task"]
        self.requests.append((task, attempts))
        if attempts == 1:
            self.calls.append(context)
        output = self.handlers[task](context | {"attempt": attempts})
        text = output if isinstance(output, str) else json.dumps(output)
        return ModelResponse(parts=[TextPart(text)])


def first_option_or(name: str) -> Handler:
    """Classify: reuse the first existing option, else create ``name`` + level."""

    def handler(context: dict[str, Any]) -> dict[str, Any]:
        if context["options"]:
            return {"category": context["options"][0], "is_new": False}
        return {"category": f"{name} {context['level']}", "is_new": True}

    return handler


def pick_first(context: dict[str, Any]) -> dict[str, Any]:
    """Select: the first ``count`` options, relevance falling with rank."""
    count = context["count"]
    return {
        "selected": [
            {"category": option, "ranked_relevance": 10 - i, "confidence": 0.9 - i / 100}
            for i, option in enumerate(context["options"][:count])
        ]
    }


def answer_all(context: dict[str, Any]) -> dict[str, Any]:
    ids = [p["chunk_id"] for p in context["passages"]]
    return {"answer": f"answered from {len(ids)} passages", "cited_chunk_ids": ids[:1]}
