"""The protocols of the embedder seam, and the one piece of shared math.

- :class:`Embedder` is what the rest of memoir uses: a stable ``embedder_id``, a known
  ``dimension``, numpy ``float32`` rows with unit length, lazy loading off the start-up
  path, and async methods that never block the event loop.
- :class:`LocalEncoder` is what an in-process model (the ONNX MiniLM, the hashing
  embedder) provides: synchronous array-in, array-out embedding plus loading hooks.
  :class:`~memory_core.embed.local.LocalEmbedder` turns one into an ``Embedder``;
  :class:`~memory_core.embed.pydantic_ai_models.LocalEmbeddingModel` turns one into a
  pydantic-ai ``EmbeddingModel``.

This module imports neither pydantic-ai nor onnxruntime: importing the seam is cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "LocalEncoder", "l2_normalise_rows"]


@runtime_checkable
class Embedder(Protocol):
    """What memoir needs from an embedder. Create one with :func:`create_embedder`."""

    @property
    def embedder_id(self) -> str:
        """Stable identity recorded in the store, e.g. ``"local:all-MiniLM-L6-v2-int8"``."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    def is_ready(self) -> bool:
        """Whether embedding can start now without waiting for a load."""
        ...

    def start_loading(self) -> None:
        """Start loading in the background; returns at once. Idempotent."""
        ...

    async def ensure_loaded(self) -> None:
        """Wait until loaded (starting the load if needed)."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts to store: ``(n, dimension)`` float32, L2-normalised rows."""
        ...

    async def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query: ``(dimension,)`` float32, L2-normalised."""
        ...


@runtime_checkable
class LocalEncoder(Protocol):
    """An in-process embedding model with synchronous, array-based inference."""

    @property
    def system(self) -> str:
        """Family of the model, the part before the colon of its id (``"local"``, ``"hash"``)."""
        ...

    @property
    def model_name(self) -> str:
        """Name of the model, the part after the colon of its id."""
        ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_input_tokens(self) -> int | None:
        """Tokens per text the model reads before truncating, or ``None`` if unbounded."""
        ...

    def is_ready(self) -> bool: ...

    def start_loading(self) -> None: ...

    def load_sync(self) -> None:
        """Load (if needed) and block until done; raises ``EmbeddingError`` on failure."""
        ...

    async def ensure_loaded(self) -> None: ...

    def embed_counted_sync(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """Embed, loading first if needed: ``((n, dim) float32 unit rows, tokens read)``."""
        ...

    def count_tokens_sync(self, text: str) -> int: ...


def l2_normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Return ``matrix`` as float32 with each row scaled to unit length.

    All-zero rows stay zero (there is no direction to keep).

    Raises:
        ValueError: ``matrix`` is not two-dimensional.
    """
    out = np.asarray(matrix, dtype=np.float32)
    if out.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {out.shape}")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    return (out / norms).astype(np.float32, copy=False)
