"""Our local encoders as pydantic-ai ``EmbeddingModel`` subclasses.

So the local MiniLM and the hashing embedder plug into anything built on pydantic-ai's
seam (``pydantic_ai.Embedder(model)``, ``Embedder.override(model=...)``, instrumentation).
This is the only module of ``memory_core.embed`` that imports pydantic-ai at import
time (about 0.7 s), which is why the package exposes these names lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio.to_thread
from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType
from pydantic_ai.usage import RequestUsage

from memory_core.embed.base import LocalEncoder
from memory_core.embed.hashing import DEFAULT_HASH_DIMENSION, HashingEncoder
from memory_core.embed.onnx_minilm import MiniLMEncoder

__all__ = ["LocalEmbeddingModel", "hashing_embedding_model", "minilm_embedding_model"]


@dataclass(init=False, eq=False)
class LocalEmbeddingModel(EmbeddingModel):
    """A :class:`~memory_core.embed.base.LocalEncoder` as a pydantic-ai ``EmbeddingModel``.

    ``system`` and ``model_name`` come from the encoder (``"local"`` /
    ``"all-MiniLM-L6-v2-int8"``, ``"hash"`` / ``"384"``). Queries and documents are
    embedded alike (both models are symmetric). The first call loads the encoder.

    Args:
        encoder: the in-process model.
        settings: pydantic-ai default settings (accepted, unused by local encoders).
    """

    encoder: LocalEncoder

    def __init__(self, encoder: LocalEncoder, *, settings: EmbeddingSettings | None = None):
        self.encoder = encoder
        super().__init__(settings=settings)

    # Identity: two adapters are equal only if they share the encoder (and its load).
    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalEmbeddingModel) and other.encoder is self.encoder

    def __hash__(self) -> int:
        return id(self.encoder)

    @property
    def model_name(self) -> str:
        return self.encoder.model_name

    @property
    def system(self) -> str:
        return self.encoder.system

    async def embed(
        self,
        inputs: str | Sequence[str],
        *,
        input_type: EmbedInputType,
        settings: EmbeddingSettings | None = None,
    ) -> EmbeddingResult:
        """Embed ``inputs``.

        Raises:
            EmbeddingError: the encoder could not be loaded.
        """
        texts, _ = self.prepare_embed(inputs, settings)
        await self.encoder.ensure_loaded()
        matrix, n_tokens = await anyio.to_thread.run_sync(self.encoder.embed_counted_sync, texts)
        return EmbeddingResult(
            embeddings=matrix.tolist(),
            inputs=texts,
            input_type=input_type,
            model_name=self.model_name,
            provider_name=self.system,
            usage=RequestUsage(input_tokens=n_tokens),
        )

    async def max_input_tokens(self) -> int | None:
        return self.encoder.max_input_tokens

    async def count_tokens(self, text: str) -> int:
        """Tokens the encoder sees in ``text``.

        Raises:
            EmbeddingError: the encoder could not be loaded.
        """
        await self.encoder.ensure_loaded()
        return await anyio.to_thread.run_sync(self.encoder.count_tokens_sync, text)


def minilm_embedding_model() -> LocalEmbeddingModel:
    """A new local all-MiniLM-L6-v2 model with default options (loads on first use).

    For other options build ``LocalEmbeddingModel(MiniLMEncoder(...))``.
    """
    return LocalEmbeddingModel(MiniLMEncoder())


def hashing_embedding_model(dim: int = DEFAULT_HASH_DIMENSION) -> LocalEmbeddingModel:
    """A new hashing model with ``dim`` buckets.

    Raises:
        ValueError: ``dim`` is not positive.
    """
    return LocalEmbeddingModel(HashingEncoder(dim))
