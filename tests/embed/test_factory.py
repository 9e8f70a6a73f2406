"""Embedder specs: what create_embedder accepts, and the errors for what it does not."""

from __future__ import annotations

import pytest

import memory_core.embed as embed_package
from memory_core.embed import (
    ACCEPTED_SPECS,
    EmbedderSpec,
    LocalEmbedder,
    ModelEmbedder,
    create_embedder,
    parse_embedder_spec,
)
from memory_core.errors import ConfigError


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("local", EmbedderSpec("local", "local:all-MiniLM-L6-v2-int8", 384)),
        ("local:all-MiniLM-L6-v2", EmbedderSpec("local", "local:all-MiniLM-L6-v2-int8", 384)),
        (
            " LOCAL:all-minilm-l6-v2-int8 ",
            EmbedderSpec("local", "local:all-MiniLM-L6-v2-int8", 384),
        ),
        ("hash", EmbedderSpec("hash", "hash", 384)),
        ("hash:256", EmbedderSpec("hash", "hash", 256)),
        (
            "openai:text-embedding-3-small",
            EmbedderSpec("provider", "openai:text-embedding-3-small", 1536),
        ),
        ("ollama:nomic-embed-text", EmbedderSpec("provider", "ollama:nomic-embed-text", None)),
    ],
)
def test_accepted_specs_parse(spec: str, expected: EmbedderSpec) -> None:
    assert parse_embedder_spec(spec) == expected


@pytest.mark.parametrize(
    "spec", ["", "   ", "minilm", "local:bert-base", "hash:0", "hash:-4", "hash:abc", ":x", "x:"]
)
def test_unknown_specs_are_config_errors_listing_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ConfigError) as raised:
        create_embedder(spec)
    assert raised.value.hint is not None
    for form in ("'local'", "'hash'", "provider"):
        assert form in raised.value.hint
    assert raised.value.details["accepted"] == list(ACCEPTED_SPECS)


def test_unknown_provider_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown embedder 'nosuchprovider:model'"):
        create_embedder("nosuchprovider:model")


def test_provider_whose_package_is_missing_is_a_config_error_naming_the_extra() -> None:
    pytest.importorskip("pydantic_ai")
    try:
        import openai  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError) as raised:
            create_embedder("openai:text-embedding-3-small")
        assert raised.value.hint and "pydantic-ai-slim[openai]" in raised.value.hint
    else:
        pytest.skip("openai is installed here; the missing-package path cannot be exercised")


def test_local_and_hash_build_local_embedders_without_loading() -> None:
    local = create_embedder()
    assert isinstance(local, LocalEmbedder)
    assert local.embedder_id == "local:all-MiniLM-L6-v2-int8"
    assert local.dimension == 384
    assert not local.is_ready()
    hashed = create_embedder("hash", dimension=128)
    assert hashed.embedder_id == "hash:128"
    assert hashed.dimension == 128


def test_dimension_contradicting_the_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="384 dimensions, not 512"):
        create_embedder("local", dimension=512)
    with pytest.raises(ConfigError, match="fixes 64 dimensions"):
        create_embedder("hash:64", dimension=32)
    with pytest.raises(ConfigError, match="positive"):
        create_embedder("hash", dimension=0)
    assert create_embedder("hash:64", dimension=64).dimension == 64


def test_public_api_is_sorted_and_importable() -> None:
    names = embed_package.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))
    for name in names:
        assert getattr(embed_package, name) is not None
    assert ModelEmbedder.__name__ in names


def test_batch_size_reaches_the_model_and_must_be_positive() -> None:
    local = create_embedder("local", batch_size=8)
    assert isinstance(local, LocalEmbedder)
    assert "batch_size=8" in repr(local.encoder)
    with pytest.raises(ConfigError, match="batch size must be positive"):
        create_embedder("hash", batch_size=0)
