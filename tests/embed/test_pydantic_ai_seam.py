"""The pydantic-ai seam: our models inside pydantic-ai, pydantic-ai models inside memoir."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from pydantic_ai.embeddings import (
    Embedder as PydanticAIEmbedder,
)
from pydantic_ai.embeddings import (
    EmbeddingModel,
    EmbeddingResult,
    EmbeddingSettings,
    TestEmbeddingModel,
)
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.exceptions import ModelHTTPError

from memory_core.embed import (
    Embedder,
    LocalEmbedder,
    LocalEmbeddingModel,
    MiniLMEncoder,
    ModelEmbedder,
    hash_embed,
    hashing_embedding_model,
)
from memory_core.errors import EmbeddingError


@pytest.mark.anyio
async def test_our_local_model_works_through_pydantic_ai_embedder(
    minilm_encoder: MiniLMEncoder,
) -> None:
    model = LocalEmbedder(minilm_encoder).model
    assert isinstance(model, EmbeddingModel)
    assert (model.system, model.model_name) == ("local", "all-MiniLM-L6-v2-int8")
    embedder = PydanticAIEmbedder(model)
    result = await embedder.embed_documents(["How do I reset my password?", "The cat sat"])
    assert len(result.embeddings) == 2
    assert len(result.embeddings[0]) == 384
    assert result.usage.input_tokens > 0
    query = await embedder.embed_query("How do I reset my password?")
    np.testing.assert_allclose(query.embeddings[0], result.embeddings[0], atol=1e-5)
    assert await embedder.max_input_tokens() == 256
    assert await embedder.count_tokens("hello world") == 4  # [CLS] hello world [SEP]


@pytest.mark.anyio
async def test_hashing_model_works_through_pydantic_ai_embedder() -> None:
    result = await PydanticAIEmbedder(hashing_embedding_model(32)).embed_documents(["abc"])
    np.testing.assert_allclose(result.embeddings[0], hash_embed(["abc"], 32)[0], atol=1e-7)
    assert result.provider_name == "hash"


def test_adapters_over_the_same_encoder_compare_equal() -> None:
    encoder = MiniLMEncoder()
    assert LocalEmbeddingModel(encoder) == LocalEmbeddingModel(encoder)
    assert LocalEmbeddingModel(encoder) != LocalEmbeddingModel(MiniLMEncoder())


@pytest.mark.anyio
async def test_test_embedding_model_through_our_wrapper_gives_the_right_shape() -> None:
    embedder = ModelEmbedder(TestEmbeddingModel(dimensions=8), dimension=8)
    assert isinstance(embedder, Embedder)
    assert embedder.embedder_id == "test:test"
    vectors = await embedder.embed_documents(["a", "b", "c"])
    assert vectors.shape == (3, 8)
    assert vectors.dtype == np.float32
    # TestEmbeddingModel returns all-ones; the wrapper normalises rows to unit length.
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert (await embedder.embed_query("q")).shape == (8,)
    assert (await embedder.embed_documents([])).shape == (0, 8)


@pytest.mark.anyio
async def test_unknown_dimension_is_probed_once_by_ensure_loaded() -> None:
    embedder = ModelEmbedder(TestEmbeddingModel(dimensions=12))
    assert not embedder.is_ready()
    with pytest.raises(EmbeddingError, match="not known yet"):
        _ = embedder.dimension
    await embedder.ensure_loaded()
    assert embedder.is_ready()
    assert embedder.dimension == 12


@pytest.mark.anyio
async def test_wrong_dimension_from_a_provider_names_expected_and_got() -> None:
    embedder = ModelEmbedder(TestEmbeddingModel(dimensions=8), dimension=16)
    with pytest.raises(EmbeddingError) as raised:
        await embedder.embed_documents(["a"])
    assert "8-dimensional" in raised.value.message
    assert "expected 16" in raised.value.message
    assert raised.value.details == {"expected": 16, "got": 8}


@dataclass(init=False)
class _FailingModel(EmbeddingModel):
    """A provider that answers HTTP 503, as a real pydantic-ai model would raise it."""

    @property
    def model_name(self) -> str:
        return "down"

    @property
    def system(self) -> str:
        return "flaky"

    async def embed(
        self,
        inputs: str | Sequence[str],
        *,
        input_type: EmbedInputType,
        settings: EmbeddingSettings | None = None,
    ) -> EmbeddingResult:
        raise ModelHTTPError(status_code=503, model_name="down", body="overloaded")


@pytest.mark.anyio
async def test_provider_failure_becomes_an_embedding_error_with_a_hint() -> None:
    embedder = ModelEmbedder(_FailingModel(), dimension=4)
    with pytest.raises(EmbeddingError) as raised:
        await embedder.embed_documents(["secret text is not in the message"])
    assert "flaky:down" in raised.value.message
    assert "secret text" not in raised.value.message
    assert raised.value.hint and "embedder='local'" in raised.value.hint


@pytest.mark.anyio
async def test_large_batches_are_split_into_provider_sized_requests() -> None:
    model = TestEmbeddingModel(dimensions=4)
    calls: list[int] = []
    original = model.embed

    async def counting_embed(inputs, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(inputs))
        return await original(inputs, **kwargs)

    model.embed = counting_embed  # type: ignore[method-assign]
    embedder = ModelEmbedder(model, dimension=4, batch_size=10)
    vectors = await embedder.embed_documents([f"t{i}" for i in range(25)])
    assert vectors.shape == (25, 4)
    assert calls == [10, 10, 5]


def test_sync_helper_runs_a_private_loop_for_provider_models() -> None:
    embedder = ModelEmbedder(TestEmbeddingModel(dimensions=5), dimension=5)
    assert embedder.embed_documents_sync(["a", "b"]).shape == (2, 5)
