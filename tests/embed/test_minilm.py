"""The real all-MiniLM-L6-v2 int8 ONNX model, offline."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core.embed import (
    MINILM_DIMENSION,
    MINILM_EMBEDDER_ID,
    LocalEmbedder,
    MiniLMEncoder,
    bundled_tokenizer_path,
)

SENTENCES = [
    "How do I reset my password?",
    "I forgot my login credentials",
    "The cat sat on the mat",
    "Use parameterised SQL queries; never build SQL strings by concatenating user input.",
    "",
    "  ",
    "naïve café — 東京 🎉 emoji and accents",
]


def test_bundled_tokenizer_ships_inside_the_package() -> None:
    path = bundled_tokenizer_path()
    assert path.is_file()
    assert path.parent.name == "data"
    assert (path.parent / "NOTICE").is_file()


@pytest.mark.anyio
async def test_vectors_have_384_dims_and_unit_length(minilm: LocalEmbedder) -> None:
    vectors = await minilm.embed_documents(SENTENCES)
    assert minilm.embedder_id == MINILM_EMBEDDER_ID == "local:all-MiniLM-L6-v2-int8"
    assert minilm.dimension == MINILM_DIMENSION == 384
    assert vectors.shape == (len(SENTENCES), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.anyio
async def test_a_paraphrase_scores_closer_than_an_unrelated_sentence(
    minilm: LocalEmbedder,
) -> None:
    query = await minilm.embed_query("How do I reset my password?")
    paraphrase, unrelated = await minilm.embed_documents(
        ["I forgot my login credentials", "The cat sat on the mat"]
    )
    assert float(query @ paraphrase) > float(query @ unrelated) + 0.3


@pytest.mark.anyio
async def test_batch_result_equals_single_results(minilm: LocalEmbedder) -> None:
    batch = await minilm.embed_documents(SENTENCES)
    singles = np.stack([await minilm.embed_query(text) for text in SENTENCES])
    np.testing.assert_allclose(batch, singles, atol=1e-5)


def test_length_sorting_across_several_batches_keeps_input_order(
    minilm_encoder: MiniLMEncoder,
) -> None:
    # batch_size 2 with mixed lengths: rows are reordered for padding, then put back.
    small_batches = MiniLMEncoder(batch_size=2)
    small_batches.load_sync()
    texts = [f"{'word ' * (i * 7 % 23)}sentence number {i}" for i in range(9)]
    expected = np.stack([minilm_encoder.embed_counted_sync([t])[0][0] for t in texts])
    got, _ = small_batches.embed_counted_sync(texts)
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.anyio
async def test_empty_batch_has_shape_zero_by_384(minilm: LocalEmbedder) -> None:
    empty = await minilm.embed_documents([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32
    assert minilm.embed_documents_sync([]).shape == (0, 384)


def test_long_text_is_truncated_to_256_word_pieces(minilm_encoder: MiniLMEncoder) -> None:
    long_text = "memoir stores rules and memories " * 200
    assert minilm_encoder.count_tokens_sync(long_text) > 256
    _, pieces_read = minilm_encoder.embed_counted_sync([long_text])
    assert pieces_read == 256
    # Text beyond the first 256 pieces cannot change the vector.
    tail_changed = long_text + " completely different ending about volcanoes"
    a = minilm_encoder.embed_counted_sync([long_text])[0]
    b = minilm_encoder.embed_counted_sync([tail_changed])[0]
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_sync_helper_matches_async_path(minilm: LocalEmbedder) -> None:
    vectors = minilm.embed_documents_sync(SENTENCES[:3])
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2]


@pytest.mark.anyio
async def test_concurrent_calls_give_the_same_vectors_as_sequential_ones(
    minilm: LocalEmbedder,
) -> None:
    import anyio

    groups = [SENTENCES[i::3] for i in range(3)]
    sequential = [await minilm.embed_documents(group) for group in groups]
    concurrent: list[np.ndarray | None] = [None] * len(groups)

    async def run(index: int) -> None:
        concurrent[index] = await minilm.embed_documents(groups[index])

    async with anyio.create_task_group() as tg:
        for index in range(len(groups)):
            tg.start_soon(run, index)
    for got, expected in zip(concurrent, sequential, strict=True):
        assert got is not None
        np.testing.assert_allclose(got, expected, atol=1e-5)
