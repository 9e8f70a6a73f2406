"""The :class:`Embedder` over an in-process :class:`LocalEncoder` (MiniLM, hashing).

The fast path: numpy arrays end to end, inference in a worker thread, no pydantic-ai
import. ``.model`` gives the same encoder as a pydantic-ai ``EmbeddingModel`` for code
that wants pydantic-ai's ``Embedder``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio.to_thread
import numpy as np

from memory_core.embed.base import LocalEncoder
from memory_core.errors import EmbeddingError

if TYPE_CHECKING:
    from memory_core.embed.pydantic_ai_models import LocalEmbeddingModel

__all__ = ["LocalEmbedder"]


class LocalEmbedder:
    """:class:`~memory_core.embed.base.Embedder` over a local encoder.

    Args:
        encoder: the in-process model.
        embedder_id: identity to record; default ``"<system>:<model_name>"``.
    """

    def __init__(self, encoder: LocalEncoder, *, embedder_id: str | None = None) -> None:
        self._encoder = encoder
        self._embedder_id = embedder_id or f"{encoder.system}:{encoder.model_name}"
        self._model: LocalEmbeddingModel | None = None

    def __repr__(self) -> str:
        return f"LocalEmbedder({self._embedder_id!r}, dimension={self.dimension})"

    @property
    def encoder(self) -> LocalEncoder:
        """The underlying encoder."""
        return self._encoder

    @property
    def model(self) -> LocalEmbeddingModel:
        """The encoder as a pydantic-ai ``EmbeddingModel`` (imports pydantic-ai on first use)."""
        if self._model is None:
            from memory_core.embed.pydantic_ai_models import LocalEmbeddingModel

            self._model = LocalEmbeddingModel(self._encoder)
        return self._model

    @property
    def embedder_id(self) -> str:
        return self._embedder_id

    @property
    def dimension(self) -> int:
        return self._encoder.dimension

    def is_ready(self) -> bool:
        return self._encoder.is_ready()

    def start_loading(self) -> None:
        self._encoder.start_loading()

    async def ensure_loaded(self) -> None:
        """Wait for the encoder to load.

        Raises:
            EmbeddingError: loading failed (the hint names the package to install).
        """
        await self._encoder.ensure_loaded()

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts to store.

        Returns:
            ``(len(texts), dimension)`` float32 array, rows L2-normalised.

        Raises:
            EmbeddingError: the model could not be loaded.
        """
        batch = list(texts)
        if not batch:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if not self._encoder.is_ready():
            await self._encoder.ensure_loaded()
        # Inference is CPU-bound: keep it off the event loop.
        matrix, _ = await anyio.to_thread.run_sync(self._encoder.embed_counted_sync, batch)
        return self._checked(matrix, len(batch))

    async def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query.

        Returns:
            ``(dimension,)`` float32 array, L2-normalised.

        Raises:
            EmbeddingError: the model could not be loaded.
        """
        return (await self.embed_documents([text]))[0]

    def embed_documents_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking :meth:`embed_documents` for CLI and benchmark code (runs in this thread).

        Raises:
            EmbeddingError: the model could not be loaded.
        """
        batch = list(texts)
        if not batch:
            return np.zeros((0, self.dimension), dtype=np.float32)
        self._encoder.load_sync()
        matrix, _ = self._encoder.embed_counted_sync(batch)
        return self._checked(matrix, len(batch))

    def _checked(self, matrix: np.ndarray, rows: int) -> np.ndarray:
        if matrix.shape != (rows, self.dimension) or matrix.dtype != np.float32:
            raise EmbeddingError(
                f"embedder {self._embedder_id!r} returned {matrix.dtype} shape {matrix.shape}, "
                f"expected float32 ({rows}, {self.dimension})",
                hint="this is a bug in the local encoder; report it with the embedder id",
                details={"expected": [rows, self.dimension], "got": list(matrix.shape)},
            )
        return matrix
