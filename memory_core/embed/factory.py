"""Build an :class:`~memory_core.embed.base.Embedder` from a configuration string.

Accepted specs:

- ``"local"`` or ``"local:all-MiniLM-L6-v2"`` (also ``…-int8``): the offline default;
- ``"hash"`` or ``"hash:<dim>"``: the deterministic hashing embedder (default 384 dims);
- ``"<provider>:<model>"``: any pydantic-ai embedding model, e.g.
  ``"openai:text-embedding-3-small"``, ``"ollama:nomic-embed-text"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from memory_core.embed.hashing import DEFAULT_HASH_DIMENSION, HashingEncoder
from memory_core.embed.local import LocalEmbedder
from memory_core.embed.onnx_minilm import MINILM_DIMENSION, MINILM_EMBEDDER_ID, MiniLMEncoder
from memory_core.embed.provider import ModelEmbedder
from memory_core.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_ai.embeddings import EmbeddingModel

__all__ = ["ACCEPTED_SPECS", "EmbedderSpec", "create_embedder", "parse_embedder_spec"]

ACCEPTED_SPECS = (
    "'local'",
    "'local:all-MiniLM-L6-v2'",
    "'hash'",
    "'hash:<dim>' (e.g. 'hash:256')",
    "'<provider>:<model>' for a pydantic-ai embedding model (e.g. 'openai:text-embedding-3-small')",
)
_LOCAL_MODEL_NAMES = frozenset(
    {"all-minilm-l6-v2", "all-minilm-l6-v2-int8", "sentence-transformers/all-minilm-l6-v2"}
)
# Vector lengths of well-known provider models, so they need no probe request.
_KNOWN_DIMENSIONS = {
    "openai:text-embedding-3-small": 1536,
    "openai:text-embedding-3-large": 3072,
    "openai:text-embedding-ada-002": 1536,
}


@dataclass(frozen=True)
class EmbedderSpec:
    """A parsed embedder spec: which kind, the model name, and a dimension if fixed."""

    kind: Literal["local", "hash", "provider"]
    model: str
    dimension: int | None


def _unknown(spec: str, reason: str) -> ConfigError:
    return ConfigError(
        f"unknown embedder {spec!r}: {reason}",
        hint="use one of " + ", ".join(ACCEPTED_SPECS),
        details={"embedder": spec, "accepted": list(ACCEPTED_SPECS)},
    )


def parse_embedder_spec(spec: str) -> EmbedderSpec:
    """Parse an embedder spec string (pure; nothing is loaded).

    Raises:
        ConfigError: the spec is not one of the accepted forms (the hint lists them).
    """
    text = spec.strip()
    if not text:
        raise _unknown(spec, "it is empty")
    prefix, sep, rest = text.partition(":")
    prefix_lower = prefix.lower()
    if prefix_lower == "local":
        if sep and rest.strip().lower() not in _LOCAL_MODEL_NAMES:
            raise _unknown(spec, f"the only local model is all-MiniLM-L6-v2, not {rest!r}")
        return EmbedderSpec(kind="local", model=MINILM_EMBEDDER_ID, dimension=MINILM_DIMENSION)
    if prefix_lower == "hash":
        if not sep:
            return EmbedderSpec(kind="hash", model="hash", dimension=DEFAULT_HASH_DIMENSION)
        try:
            dim = int(rest)
        except ValueError:
            raise _unknown(spec, f"the hash dimension {rest!r} is not an integer") from None
        if dim <= 0 or dim > 65536:
            raise _unknown(spec, f"the hash dimension {dim} is not in 1..65536")
        return EmbedderSpec(kind="hash", model="hash", dimension=dim)
    if not sep or not prefix or not rest:
        raise _unknown(spec, "expected 'local', 'hash[:dim]' or 'provider:model'")
    return EmbedderSpec(kind="provider", model=text, dimension=_KNOWN_DIMENSIONS.get(text))


def create_embedder(
    spec: str = "local", *, dimension: int | None = None, batch_size: int | None = None
) -> LocalEmbedder | ModelEmbedder:
    """Create the embedder named by ``spec``. Cheap: the local model loads lazily.

    Args:
        spec: ``"local"``, ``"local:all-MiniLM-L6-v2"``, ``"hash"``, ``"hash:<dim>"`` or a
            pydantic-ai ``"provider:model"`` string.
        dimension: the vector length, for provider models (otherwise known for
            well-known models, or probed once by ``ensure_loaded``). For ``hash`` it sets
            the bucket count when the spec does not; for ``local`` it must be 384.
        batch_size: texts per model call (ONNX batch for ``local``, request size for
            providers); default 32 for ``local``, 128 for providers.

    Returns:
        An :class:`~memory_core.embed.base.Embedder`: a :class:`LocalEmbedder` for
        ``local`` and ``hash``, a :class:`ModelEmbedder` for provider models.

    Raises:
        ConfigError: unknown spec, a provider package that is not installed, a missing
            API key, a dimension that contradicts the model, or a non-positive batch size.
    """
    parsed = parse_embedder_spec(spec)
    if batch_size is not None and batch_size <= 0:
        raise ConfigError(
            f"embedding batch size must be positive, got {batch_size}",
            hint="set the embedding batch size to e.g. 32, or leave it unset",
        )
    if dimension is not None and dimension <= 0:
        raise ConfigError(
            f"embedding dimension must be positive, got {dimension}",
            hint="set the embedding dimension to the model's vector length, or leave it unset",
        )
    if parsed.kind == "local":
        if dimension not in (None, MINILM_DIMENSION):
            raise ConfigError(
                f"the local embedder all-MiniLM-L6-v2 has 384 dimensions, not {dimension}",
                hint="remove the dimension setting, or use 'hash:<dim>' for another size",
            )
        encoder = MiniLMEncoder() if batch_size is None else MiniLMEncoder(batch_size=batch_size)
        return LocalEmbedder(encoder, embedder_id=MINILM_EMBEDDER_ID)
    if parsed.kind == "hash":
        explicit = ":" in spec
        if explicit and dimension is not None and dimension != parsed.dimension:
            raise ConfigError(
                f"embedder {spec!r} fixes {parsed.dimension} dimensions, but dimension={dimension}",
                hint="give the dimension once, either in the spec or as a setting",
            )
        dim = dimension if (dimension is not None and not explicit) else parsed.dimension
        assert dim is not None
        return LocalEmbedder(HashingEncoder(dim), embedder_id=f"hash:{dim}")
    return ModelEmbedder(
        _infer_provider_model(parsed.model),
        embedder_id=parsed.model,
        dimension=dimension if dimension is not None else parsed.dimension,
        batch_size=batch_size,
    )


def _infer_provider_model(model: str) -> EmbeddingModel:
    # Imported here: pydantic-ai's provider registry is only needed for provider specs.
    from pydantic_ai.embeddings import infer_embedding_model
    from pydantic_ai.exceptions import UserError

    try:
        return infer_embedding_model(model)
    except ImportError as exc:
        raise ConfigError(
            f"embedder {model!r} needs a package that is not installed: {exc}",
            hint="install the provider's extra, e.g. pip install 'pydantic-ai-slim[openai]', "
            "or use embedder='local'",
        ) from exc
    except UserError as exc:
        # pydantic-ai raises UserError for a missing API key or base URL and for an
        # unknown model kind.
        raise ConfigError(
            f"embedder {model!r} cannot be configured: {exc}",
            hint="set the provider's API key / base URL environment variable, "
            "or use one of " + ", ".join(ACCEPTED_SPECS),
        ) from exc
    except ValueError as exc:
        raise _unknown(model, str(exc)) from exc
