"""The embedder seam: text in, L2-normalised float32 vectors out.

Use :func:`create_embedder` with a spec (``"local"``, ``"hash:256"``,
``"openai:text-embedding-3-small"`` …) and talk to the returned :class:`Embedder`.

Importing this package is cheap: onnxruntime loads on ``start_loading()`` (in a
background thread) or on first use, and pydantic-ai (about 0.7 s to import) only when a
provider model or a pydantic-ai adapter (``LocalEmbeddingModel`` …) is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_core.embed.base import Embedder, LocalEncoder, l2_normalise_rows
from memory_core.embed.factory import (
    ACCEPTED_SPECS,
    EmbedderSpec,
    create_embedder,
    parse_embedder_spec,
)
from memory_core.embed.hashing import DEFAULT_HASH_DIMENSION, HashingEncoder, hash_embed
from memory_core.embed.local import LocalEmbedder
from memory_core.embed.onnx_minilm import (
    MINILM_DIMENSION,
    MINILM_EMBEDDER_ID,
    MINILM_MODEL_NAME,
    MiniLMEncoder,
    bundled_tokenizer_path,
)
from memory_core.embed.provider import ModelEmbedder

if TYPE_CHECKING:
    from memory_core.embed.pydantic_ai_models import (
        LocalEmbeddingModel,
        hashing_embedding_model,
        minilm_embedding_model,
    )

__all__ = [
    "ACCEPTED_SPECS",
    "DEFAULT_HASH_DIMENSION",
    "MINILM_DIMENSION",
    "MINILM_EMBEDDER_ID",
    "MINILM_MODEL_NAME",
    "Embedder",
    "EmbedderSpec",
    "HashingEncoder",
    "LocalEmbedder",
    "LocalEmbeddingModel",
    "LocalEncoder",
    "MiniLMEncoder",
    "ModelEmbedder",
    "bundled_tokenizer_path",
    "create_embedder",
    "hash_embed",
    "hashing_embedding_model",
    "l2_normalise_rows",
    "minilm_embedding_model",
    "parse_embedder_spec",
]

_PYDANTIC_AI_NAMES = frozenset(
    {"LocalEmbeddingModel", "hashing_embedding_model", "minilm_embedding_model"}
)


def __getattr__(name: str) -> Any:
    # The pydantic-ai adapters import pydantic-ai; load them only when asked for.
    if name in _PYDANTIC_AI_NAMES:
        from memory_core.embed import pydantic_ai_models

        return getattr(pydantic_ai_models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
