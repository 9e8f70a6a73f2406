"""Fixtures for the embedder tests: one real MiniLM load shared by the session."""

from __future__ import annotations

import pytest

from memory_core.embed import LocalEmbedder, MiniLMEncoder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def minilm_encoder() -> MiniLMEncoder:
    """The real int8 ONNX model, loaded once (about 0.4 s)."""
    encoder = MiniLMEncoder()
    encoder.load_sync()
    return encoder


@pytest.fixture
def minilm(minilm_encoder: MiniLMEncoder) -> LocalEmbedder:
    return LocalEmbedder(minilm_encoder)
