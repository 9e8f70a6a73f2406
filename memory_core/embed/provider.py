"""The :class:`Embedder` over any pydantic-ai ``EmbeddingModel`` (remote providers, fakes).

Used for ``provider:model`` specs (``openai:text-embedding-3-small``, ``ollama:…``) and
for pydantic-ai's ``TestEmbeddingModel`` in tests. Vectors come back as lists of floats;
this wrapper turns them into float32 arrays, re-normalises them (providers differ), and
checks their dimension.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import anyio
import numpy as np
import structlog

from memory_core.embed.base import l2_normalise_rows
from memory_core.errors import EmbeddingError

if TYPE_CHECKING:
    from pydantic_ai.embeddings import EmbeddingModel

__all__ = ["ModelEmbedder"]

logger = structlog.get_logger(__name__)

# Remote providers cap the inputs per request (OpenAI: 2048); stay well below.
_BATCH_SIZE = 128
_DIMENSION_PROBE_TEXT = "memoir dimension probe"


class ModelEmbedder:
    """:class:`~memory_core.embed.base.Embedder` over a pydantic-ai ``EmbeddingModel``.

    Args:
        model: any pydantic-ai embedding model.
        embedder_id: identity to record; default ``"<system>:<model_name>"``.
        dimension: expected vector length; if ``None`` it is probed once (one request
            embedding a fixed short text) by :meth:`ensure_loaded` or the first call.
        batch_size: texts per provider request (default 128).

    Raises:
        EmbeddingError: ``dimension`` or ``batch_size`` is not positive.
    """

    def __init__(
        self,
        model: EmbeddingModel,
        *,
        embedder_id: str | None = None,
        dimension: int | None = None,
        batch_size: int | None = None,
    ) -> None:
        if dimension is not None and dimension <= 0:
            raise EmbeddingError(
                f"embedding dimension must be positive, got {dimension}",
                hint="set the dimension to the model's vector length (e.g. 1536), or leave it unset",
            )
        if batch_size is None:
            batch_size = _BATCH_SIZE
        if batch_size <= 0:
            raise EmbeddingError(
                f"embedding batch size must be positive, got {batch_size}",
                hint="use a batch size such as 128",
            )
        self._model = model
        self._embedder_id = embedder_id or f"{model.system}:{model.model_name}"
        self._dimension = dimension
        self._batch_size = batch_size

    def __repr__(self) -> str:
        return f"ModelEmbedder({self._embedder_id!r}, dimension={self._dimension})"

    @property
    def model(self) -> EmbeddingModel:
        """The underlying pydantic-ai model."""
        return self._model

    @property
    def embedder_id(self) -> str:
        return self._embedder_id

    @property
    def dimension(self) -> int:
        """Vector length.

        Raises:
            EmbeddingError: not known yet: no dimension was configured and
                :meth:`ensure_loaded` has not probed the provider.
        """
        if self._dimension is None:
            raise EmbeddingError(
                f"the dimension of embedder {self._embedder_id!r} is not known yet",
                hint="await ensure_loaded() first (it asks the provider once), "
                "or configure the embedding dimension",
            )
        return self._dimension

    def is_ready(self) -> bool:
        """Ready once the dimension is known (remote models need no load)."""
        return self._dimension is not None

    def start_loading(self) -> None:
        """Nothing to load in-process; the dimension probe needs the event loop."""
        return None

    async def ensure_loaded(self) -> None:
        """Learn the dimension with one probe request if it was not configured.

        Raises:
            EmbeddingError: the provider failed.
        """
        if self._dimension is None:
            probe = await self._request([_DIMENSION_PROBE_TEXT], "document")
            self._dimension = int(probe.shape[1])
            logger.info(
                "embedder_dimension_probed", embedder=self._embedder_id, dim=self._dimension
            )

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts to store.

        Returns:
            ``(len(texts), dimension)`` float32 array, rows L2-normalised.

        Raises:
            EmbeddingError: the provider failed, or returned vectors of another dimension.
        """
        return await self._embed(list(texts), "document")

    async def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query (as a query: some providers embed queries differently).

        Returns:
            ``(dimension,)`` float32 array, L2-normalised.

        Raises:
            EmbeddingError: as for :meth:`embed_documents`.
        """
        return (await self._embed([text], "query"))[0]

    def embed_documents_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Blocking :meth:`embed_documents` on a private event loop.

        Do not call it from inside a running event loop (use the async method there).

        Raises:
            EmbeddingError: as for :meth:`embed_documents`.
        """
        return anyio.run(self._embed, list(texts), "document")

    async def _embed(
        self, texts: list[str], input_type: Literal["query", "document"]
    ) -> np.ndarray:
        await self.ensure_loaded()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return await self._request(texts, input_type)

    async def _request(
        self, texts: list[str], input_type: Literal["query", "document"]
    ) -> np.ndarray:
        from pydantic_ai.exceptions import AgentRunError, ModelAPIError, UnexpectedModelBehavior

        parts: list[np.ndarray] = []
        for start in range(0, len(texts), self._batch_size):
            chunk = texts[start : start + self._batch_size]
            try:
                result = await self._model.embed(chunk, input_type=input_type)
            except (ModelAPIError, AgentRunError, UnexpectedModelBehavior) as exc:
                raise EmbeddingError(
                    f"embedder {self._embedder_id!r} failed on a batch of {len(chunk)} texts: "
                    f"{type(exc).__name__}: {exc}",
                    hint="check the provider's API key, base URL and quota, "
                    "or switch to the offline embedder with embedder='local'",
                ) from exc
            parts.append(self._as_matrix(result.embeddings, len(chunk)))
        return l2_normalise_rows(np.concatenate(parts, axis=0))

    def _as_matrix(self, embeddings: Sequence[Sequence[float]], rows: int) -> np.ndarray:
        if len(embeddings) != rows:
            raise EmbeddingError(
                f"embedder {self._embedder_id!r} returned {len(embeddings)} vectors "
                f"for {rows} texts",
                hint="the provider answered incompletely; retry, or report it with the embedder id",
            )
        lengths = {len(vector) for vector in embeddings}
        if len(lengths) != 1:
            raise EmbeddingError(
                f"embedder {self._embedder_id!r} returned vectors of mixed lengths "
                f"{sorted(lengths)}",
                hint="check the provider's 'dimensions' setting",
            )
        got = lengths.pop()
        if self._dimension is not None and got != self._dimension:
            raise EmbeddingError(
                f"embedder {self._embedder_id!r} returned {got}-dimensional vectors, "
                f"expected {self._dimension}",
                hint=f"set the embedding dimension to {got} (and re-embed the store), "
                f"or pick a model that produces {self._dimension} dimensions",
                details={"expected": self._dimension, "got": got},
            )
        return np.asarray(embeddings, dtype=np.float32)
