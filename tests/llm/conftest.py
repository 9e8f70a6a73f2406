"""Fixtures for the LLM-layer tests: real requests forbidden, pydantic-ai fakes only."""

from __future__ import annotations

from collections.abc import Iterator

import pydantic_ai.models
import pytest

from memory_core.embed import create_embedder
from memory_core.llm.offline import OfflineModel
from memory_core.tokens import create_token_counter


@pytest.fixture(autouse=True)
def no_real_model_requests() -> Iterator[None]:
    previous = pydantic_ai.models.ALLOW_MODEL_REQUESTS
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = False
    yield
    pydantic_ai.models.ALLOW_MODEL_REQUESTS = previous


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def offline() -> OfflineModel:
    return OfflineModel(
        create_embedder("hash:384"),
        create_token_counter("tiktoken:o200k_base"),
        reuse_threshold=0.35,
    )
